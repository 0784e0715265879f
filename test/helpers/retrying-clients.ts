/**
 * Clients as a deployment's clients behave when things fail under them, for the system tests
 * of faults under load (instances killed, PostgreSQL or PgBouncer restarted):
 *
 * - `send`: one request on a connection of its own (no keep-alive, so a broken connection is
 *   always this request's, never a stale pooled socket's).
 * - writers: keyed task creations, each sent again with its `Idempotency-Key` until the answer
 *   is neither a 503 nor a broken connection (and a 409 request_in_progress only after its
 *   request was cut off once: its first run may still hold the key a moment). Every answer is
 *   counted; anything but 201, 503 with Retry-After and such a 409 is `unexpected`.
 * - followers: event streams that reconnect with `Last-Event-ID` whenever their stream ends
 *   or is refused, recording every event id they receive and every `event: error`.
 * - readers (`readBack`): each reads its user's newest acknowledged task again and again;
 *   anything but 200 or 503 with Retry-After (a 404 from a server behind the primary) is `unexpected`.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { expect } from 'vitest';
import { eventually } from './eventually.js';
import { openStream, type SseStream } from './sse.js';

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One request on a connection of its own (no keep-alive: a reset is then always this request's). */
export function send(url: string, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: {
          Connection: 'close',
          ...(options.token ? { Authorization: options.token } : {}),
          ...(payload === undefined ? {} : { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(payload)) }),
          ...options.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

export async function register(url: string, username: string): Promise<string> {
  const res = await send(url, 'POST', '/api/users', { body: { user: { username, password: 'password1' } } });
  expect(res.status, res.text).toBe(201);
  return JSON.parse(res.text).meta.token as string;
}

export interface LoggedEvent {
  id: string;
  type: string;
  data: { id: number; attributes?: { label?: string } };
}

/** A user's whole change log, through the REST list (100 a page, following links.next). */
export async function changeLog(url: string, token: string): Promise<LoggedEvent[]> {
  const events: LoggedEvent[] = [];
  for (let path: string | undefined = '/api/users/me/events?after=0'; path; ) {
    const res = await send(url, 'GET', path, { token });
    expect(res.status, res.text).toBe(200);
    const page = JSON.parse(res.text) as { data: LoggedEvent[]; links?: { next?: string } };
    events.push(...page.data);
    const next = page.links?.next ? new URL(page.links.next, url) : undefined;
    path = next ? next.pathname + next.search : undefined;
  }
  return events;
}

/**
 * A client's pause before it asks again after a 503 (its Retry-After, shortened for the
 * test): a wait on the clock, as a client's back-off is.
 */
export async function backOff(ms = 50): Promise<void> {
  const until = performance.now() + ms;
  await eventually(() => performance.now() >= until, { interval: ms, message: 'the back-off' });
}

export interface Follower {
  /** Whose stream it is (an index into the load's tokens). */
  user: number;
  /** The ids of the events received, in order, over every reconnection. */
  seen: string[];
  errorEvents: number;
  reconnects: number;
  stream?: SseStream;
}

export interface Load {
  /** How its keys start (`<prefix>-`). */
  prefix: string;
  /** Each acknowledged key (201): its token, body and the answer's text. */
  acknowledged: Map<string, { token: string; body: unknown; text: string }>;
  /** Keys whose request was cut off (503, broken connection) at least once. */
  cutKeys: Set<string>;
  /** Every status received, with its count. */
  statuses: Map<number, number>;
  /** What no client should ever see: any other status, a 503 without Retry-After, a broken connection when `resetsAllowed` is false. */
  unexpected: string[];
  followers: Follower[];
  /** Requests sent again after a 503, a broken connection or a 409 of a cut-off key. */
  retries: number;
  /** Reads of acknowledged tasks (`readBack`): found, and refused 503. */
  reads: { found: number; refused: number };
  /** Resolves once `n` more writes were acknowledged. */
  afterMore(n: number, what: string): Promise<void>;
  /** Stops the writers and readers (each finishes its request) and waits for them. */
  stopWriting(): Promise<void>;
  /** Stops every client at once without waiting for any (the clean-up of a test that failed first). */
  halt(): void;
  /** Waits until each follower saw as many events as its user's log has, then closes them. */
  stopFollowing(logs: LoggedEvent[][]): Promise<void>;
}

/**
 * Starts a writer per token and `streamsPerUser` followers per token. `writeUrl(n)` is where
 * the n-th request goes, `streamUrl(n)` where the n-th stream opens (a balancer's address, or
 * instances in turn).
 */
export function startLoad(options: {
  tokens: string[];
  writeUrl: (n: number) => string;
  streamUrl: (n: number) => string;
  streamsPerUser: number;
  /** Whether a broken connection may be seen (no balancer that retries in front). */
  resetsAllowed?: boolean;
  /** How this load's keys (and so its tasks' labels) start: one of its own per load on a database. */
  prefix: string;
  /** How long a write is sent again before the load fails (20 s unless given). */
  patienceMs?: number;
  /** Told of every answer to a write: its status, when its request was sent and when it was answered (performance.now()). */
  onAnswer?: (status: number, sentAt: number, answeredAt: number) => void;
  /**
   * A reader per token besides its writer, reading back the token's newest acknowledged task
   * over and over: it must be found (200), or the read refused 503 with Retry-After; anything
   * else (a 404: a read from a server behind what was acknowledged) is unexpected.
   */
  readBack?: boolean;
}): Load {
  if (!/^[a-z0-9]+$/.test(options.prefix)) throw new Error(`startLoad: prefix ${options.prefix} is not [a-z0-9]+`);
  const load: Load = {
    prefix: options.prefix,
    acknowledged: new Map(),
    cutKeys: new Set(),
    statuses: new Map(),
    unexpected: [],
    followers: [],
    retries: 0,
    reads: { found: 0, refused: 0 },
    afterMore: async (n, what) => {
      const target = load.acknowledged.size + n;
      await eventually(() => load.acknowledged.size >= target, { timeout: 20_000, interval: 10, message: `${n} more writes acknowledged ${what}` });
    },
    stopWriting: async () => {
      stopping = true;
      await Promise.all([writers, readers]);
    },
    stopFollowing: async (logs) => {
      await eventually(() => load.followers.every((f) => f.seen.length >= logs[f.user]!.length), {
        timeout: 10_000,
        message: 'every stream caught up with its log',
      });
      following = false;
      load.followers.forEach((f) => f.stream?.close());
      await followed;
    },
    halt: () => {
      stopping = true;
      following = false;
      load.followers.forEach((f) => f.stream?.close());
    },
  };
  let stopping = false;
  let following = true;
  let sent = 0;
  let opened = 0;

  const keyedWrite = async (token: string, key: string, body: unknown) => {
    let cut = false;
    const final = await eventually(
      async () => {
        let res: Answer;
        const sentAt = performance.now();
        try {
          res = await send(options.writeUrl(sent++), 'POST', '/api/users/me/tasks', { token, body, headers: { 'Idempotency-Key': key } });
          options.onAnswer?.(res.status, sentAt, performance.now());
        } catch (error) {
          if (!options.resetsAllowed) load.unexpected.push(`${key}: ${String(error)}`);
          cut = true;
          load.retries += 1;
          return false;
        }
        load.statuses.set(res.status, (load.statuses.get(res.status) ?? 0) + 1);
        if (res.status === 503) {
          if (!res.headers['retry-after']) load.unexpected.push(`${key}: 503 without Retry-After: ${res.text}`);
          if (JSON.parse(res.text).errors?.[0]?.code !== 'unavailable') load.unexpected.push(`${key}: 503 ${res.text}`);
          cut = true;
          load.retries += 1;
          return false;
        }
        // The first run of a request cut off with its connection may still hold its key a moment.
        if (res.status === 409 && cut && JSON.parse(res.text).errors?.[0]?.code === 'request_in_progress') {
          load.retries += 1;
          return false;
        }
        return res;
      },
      { timeout: options.patienceMs ?? 20_000, interval: 25, message: `an answer to ${key} other than 503` },
    );
    if (cut) load.cutKeys.add(key);
    if (final.status !== 201) load.unexpected.push(`${key}: ${final.status} ${final.text}`);
    else {
      load.acknowledged.set(key, { token, body, text: final.text });
      newest.set(token, String(JSON.parse(final.text).data.id));
    }
  };
  /** Each token's newest acknowledged task, for its reader. */
  const newest = new Map<string, string>();
  const reader = async (token: string) => {
    while (!stopping) {
      const id = newest.get(token);
      if (id === undefined) {
        await backOff();
        continue;
      }
      let res: Answer;
      try {
        res = await send(options.writeUrl(sent++), 'GET', `/api/tasks/${id}`, { token });
      } catch (error) {
        if (!options.resetsAllowed) load.unexpected.push(`read of task ${id}: ${String(error)}`);
        await backOff();
        continue;
      }
      if (res.status === 200) load.reads.found += 1;
      else if (res.status === 503 && res.headers['retry-after'] && JSON.parse(res.text).errors?.[0]?.code === 'unavailable') load.reads.refused += 1;
      else load.unexpected.push(`read of acknowledged task ${id}: ${res.status} ${res.text}`);
      // A client's pace, not a flood: the writers' requests are what the windows measure.
      await backOff(100);
    }
  };
  const writer = async (u: number) => {
    for (let i = 0; !stopping; i++) {
      const key = `${options.prefix}-${u}-${i}-${randomUUID()}`;
      await keyedWrite(options.tokens[u]!, key, { task: { label: key } });
    }
  };

  const follow = async (f: Follower) => {
    let last = '0';
    while (following) {
      let stream: SseStream;
      try {
        stream = await openStream(`${options.streamUrl(opened++)}/api/users/me/events`, { Authorization: options.tokens[f.user]!, 'Last-Event-ID': last });
      } catch {
        f.reconnects += 1;
        await backOff();
        continue;
      }
      f.stream = stream;
      if (stream.status !== 200) {
        if (stream.status !== 503 || !stream.headers.get('retry-after')) load.unexpected.push(`stream: ${stream.status} ${stream.text}`);
        f.reconnects += 1;
        await backOff();
        continue;
      }
      for (;;) {
        let message;
        try {
          message = await stream.next(60_000);
        } catch {
          break; // the stream ended (its instance or database went) or was closed
        }
        if (message.event === 'error') {
          f.errorEvents += 1;
          const code = JSON.parse(message.data ?? '{}').errors?.[0]?.code;
          if (code !== 'unavailable') load.unexpected.push(`stream error event: ${message.data}`);
          continue;
        }
        if (message.data === undefined || message.id === undefined) continue;
        f.seen.push(message.id);
        last = message.id;
      }
      if (following) f.reconnects += 1;
    }
  };
  const followed = Promise.all(
    options.tokens.flatMap((_, user) =>
      Array.from({ length: options.streamsPerUser }, () => {
        const f: Follower = { user, seen: [], errorEvents: 0, reconnects: 0 };
        load.followers.push(f);
        return follow(f);
      }),
    ),
  );
  const writers = Promise.all(options.tokens.map((_, u) => writer(u)));
  const readers = Promise.all(options.readBack ? options.tokens.map((token) => reader(token)) : []);
  return load;
}

/** One line for the test's output: what the load saw. */
export function describeLoad(load: Load, ms: number): string {
  const sum = (pick: (f: Follower) => number) => load.followers.reduce((n, f) => n + pick(f), 0);
  return (
    `${load.acknowledged.size} keyed writes in ${(ms / 1000).toFixed(1)} s, answers ${JSON.stringify(Object.fromEntries(load.statuses))}, ` +
    `${load.retries} retries (${load.cutKeys.size} keys cut off), ${load.followers.length} streams: ${sum((f) => f.reconnects)} reconnects, ${sum((f) => f.errorEvents)} error events` +
    (load.reads.found + load.reads.refused > 0 ? `, read back ${load.reads.found} times (${load.reads.refused} refused 503)` : '')
  );
}

/**
 * Once the writers stopped: every acknowledged write is there exactly once (a task row with
 * its key as label, and one task.created event in its user's log), no other key of the load
 * was written;
 * a key sent again (each one cut off, and every 10th) gets its original answer, replayed; and
 * every follower saw its user's whole log, once and in order. Returns the logs.
 */
export async function expectNothingLost(load: Load, options: { directUrl: string; url: string; tokens: string[] }): Promise<LoggedEvent[][]> {
  const client = new pg.Client({ connectionString: options.directUrl });
  await client.connect();
  try {
    const rows = (await client.query<{ label: string; n: number }>('select label, count(*)::int as n from tasks where label like $1 group by label', [`${load.prefix}-%`])).rows;
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(new Set(rows.map((r) => r.label))).toEqual(new Set(load.acknowledged.keys()));
  } finally {
    await client.end();
  }
  const logs = await Promise.all(options.tokens.map((token) => changeLog(options.url, token)));
  const created = logs.flat().filter((e) => e.type === 'task.created').map((e) => e.data.attributes!.label!);
  expect(created.length).toBe(load.acknowledged.size);
  expect(new Set(created)).toEqual(new Set(load.acknowledged.keys()));

  const keys = [...load.acknowledged].filter(([key], i) => load.cutKeys.has(key) || i % 10 === 0);
  for (let i = 0; i < keys.length; i += 16) {
    await Promise.all(
      keys.slice(i, i + 16).map(async ([key, sent]) => {
        const again = await send(options.url, 'POST', '/api/users/me/tasks', { token: sent.token, body: sent.body, headers: { 'Idempotency-Key': key } });
        expect({ status: again.status, replayed: again.headers['idempotent-replayed'], text: again.text }, key).toEqual({ status: 201, replayed: 'true', text: sent.text });
      }),
    );
  }

  await load.stopFollowing(logs);
  for (const [n, f] of load.followers.entries()) expect(f.seen, `stream ${n}`).toEqual(logs[f.user]!.map((e) => e.id));
  expect(load.unexpected).toEqual([]);
  expect([...load.statuses.keys()].filter((s) => s !== 201 && s !== 503 && s !== 409)).toEqual([]);
  return logs;
}
