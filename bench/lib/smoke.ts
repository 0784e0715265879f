/**
 * A smoke of the service, run the same on several targets and compared: each step is a request
 * (or a check) with a label, the status the contract expects and the status it got. Requests
 * carry an `X-Request-Id` of their own (`smoke-<target>-<n>`), which the service keeps and
 * logs with any failure, so a failed step can be matched with the service's log lines.
 */
import http from 'node:http';

export interface Step {
  label: string;
  /** `GET /api/...`, or `check` for what is not one request. */
  request: string;
  expected: number | string;
  got: number | string;
  requestId?: string;
  /** The start of the answer's body when it was not the expected one. */
  detail?: string;
  ms?: number;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // The answers' shapes are the contract's; the smoke reads a few members of them.
  json: any;
}

export interface CallOptions {
  token?: string | null;
  body?: unknown;
  /** A body sent as it is (for malformed input). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export class SmokeRun {
  readonly steps: Step[] = [];
  #n = 0;

  constructor(
    readonly base: string,
    readonly tag: string,
  ) {}

  /** The next request id of this run. */
  nextRequestId(): string {
    return `smoke-${this.tag}-${++this.#n}`;
  }

  /** One request, recorded as a step expecting `expected`. */
  async call(label: string, expected: number, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const requestId = this.nextRequestId();
    const headers: Record<string, string> = { 'x-request-id': requestId, ...options.headers };
    if (options.token) headers.authorization = options.token;
    const body = options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    if (body !== undefined) headers['content-type'] = 'application/json';
    const t0 = performance.now();
    let answer: Answer;
    try {
      const res = await fetch(this.base + path, { method, headers, body });
      const text = await res.text();
      let json: unknown = undefined;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON (a 304, an SSE answer)
      }
      answer = { status: res.status, headers: res.headers, text, json };
    } catch (error) {
      answer = { status: 0, headers: new Headers(), text: String(error), json: undefined };
    }
    this.steps.push({
      label,
      request: `${method} ${shortPath(path)}`,
      expected,
      got: answer.status,
      requestId,
      ms: performance.now() - t0,
      ...(answer.status === expected ? {} : { detail: answer.text.slice(0, 300) }),
    });
    return answer;
  }

  /** A check that is not one request (a live event, attempts recorded): `ok` or what was seen. */
  check(label: string, ok: boolean, seen: string, requestId?: string): void {
    this.steps.push({ label, request: 'check', expected: 'ok', got: ok ? 'ok' : seen, ...(requestId ? { requestId } : {}) });
  }
}

/** A path with its long query (a tRPC input) cut short, for reports. */
export function shortPath(path: string): string {
  return path.length > 90 ? `${path.slice(0, 87)}…` : path;
}

export interface SseReader {
  status: number;
  requestId: string;
  /** Everything read so far. */
  text(): string;
  /** Resolves with the ms it waited once the text read so far includes `needle`; undefined after `ms`. */
  waitFor(needle: string, ms: number): Promise<number | undefined>;
  close(): void;
}

/** Opens an event stream (GET `url` with Accept: text/event-stream); resolves once its answer's head is in. */
export function openSse(url: string, headers: Record<string, string>, requestId: string): Promise<SseReader> {
  return new Promise((resolve, reject) => {
    let text = '';
    const waiters = new Set<() => void>();
    const req = http.get(url, { headers: { accept: 'text/event-stream', 'x-request-id': requestId, ...headers } }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        for (const w of waiters) w();
      });
      res.on('error', () => undefined);
      resolve({
        status: res.statusCode ?? 0,
        requestId,
        text: () => text,
        waitFor(needle, ms) {
          const t0 = performance.now();
          return new Promise((done) => {
            const check = () => {
              if (!text.includes(needle)) return;
              waiters.delete(check);
              clearTimeout(timer);
              done(performance.now() - t0);
            };
            const timer = setTimeout(() => {
              waiters.delete(check);
              done(undefined);
            }, ms);
            waiters.add(check);
            check();
          });
        },
        close: () => req.destroy(),
      });
    });
    req.on('error', (error) => reject(error));
  });
}
