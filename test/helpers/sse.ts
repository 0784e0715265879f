/** A Server-Sent Events reader for tests: opens a stream with fetch and hands out its messages. */
export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
  /** Comment lines (`: ...`) of the block. */
  comments: string[];
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** The body when the answer is not a stream (an error envelope). */
  text?: string;
  /** The next message, or the reason there is none within `ms` (throws). */
  next(ms?: number): Promise<SseMessage>;
  /** The next message that carries an event (skipping heartbeats). */
  nextEvent(ms?: number): Promise<SseMessage & { data: string }>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openStream(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const queue: SseMessage[] = [];
  const waiters: Array<() => void> = [];
  let endedResolve!: () => void;
  const ended = new Promise<void>((resolve) => (endedResolve = resolve));
  let done = false;
  const isStream = response.headers.get('content-type')?.startsWith('text/event-stream') ?? false;
  const text = isStream ? undefined : await response.text();
  if (isStream) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let cut: number;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const message: SseMessage = { comments: [] };
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) message.comments.push(line.slice(1).trim());
              else {
                const colon = line.indexOf(':');
                const field = colon < 0 ? line : line.slice(0, colon);
                const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
                if (field === 'id' || field === 'event') message[field] = value;
                else if (field === 'data') message.data = message.data === undefined ? value : `${message.data}\n${value}`;
              }
            }
            queue.push(message);
            waiters.shift()?.();
          }
        }
      } catch {
        // aborted by close()
      } finally {
        done = true;
        endedResolve();
        for (const w of waiters.splice(0)) w();
      }
    })();
  } else {
    done = true;
    endedResolve();
  }

  async function next(ms = 5_000): Promise<SseMessage> {
    const deadline = Date.now() + ms;
    while (queue.length === 0) {
      if (done) throw new Error('the stream ended before another message');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return queue.shift()!;
  }

  return {
    status: response.status,
    headers: response.headers,
    text,
    next,
    async nextEvent(ms = 5_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const message = await next(Math.max(1, deadline - Date.now()));
        if (message.data !== undefined) return message as SseMessage & { data: string };
      }
    },
    ended,
    close: () => abort.abort(),
  };
}

/**
 * `events.onChange` on the tRPC door at `baseUrl`, read as its SSE answer: the refusal it
 * carries (the error's `json`), or null once it is open. An open subscription from id 0 sends
 * the user's first event at once, so the user's log must hold one. Whoever calls it closes
 * the stream.
 */
export async function openTrpcStream(baseUrl: string, token: string): Promise<{ stream: SseStream; refusal: any }> {
  const input = encodeURIComponent(JSON.stringify({ json: { lastEventId: '0' } }));
  const stream = await openStream(`${baseUrl}/trpc/events.onChange?input=${input}`, { Authorization: token });
  if (stream.status !== 200) {
    stream.close();
    throw new Error(`the tRPC stream answered ${stream.status}: ${stream.text}`);
  }
  for (;;) {
    const message = await stream.next(10_000);
    if (message.event === 'serialized-error') return { stream, refusal: JSON.parse(message.data!).json };
    if (message.event === undefined && message.data !== undefined) return { stream, refusal: null };
  }
}
