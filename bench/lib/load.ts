/**
 * autocannon with a script per connection: each connection gets its own request generator
 * (so a connection can own the tasks or the project it flips, and never races another one),
 * and every response's status and latency is kept, so several slices of one scenario (run
 * in turns with another target) can be merged into exact percentiles.
 */
import autocannon from 'autocannon';

export interface BenchRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  token: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Called once per connection (0, 1, …); returns that connection's next-request function. */
export type Script = (connection: number) => () => BenchRequest;

export interface LoadResult {
  /** Seconds the load ran. */
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  max: number;
  /** Responses received. */
  completed: number;
  /** Requests written (completed + in flight when the run stopped). */
  sent: number;
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
  statuses: Record<string, number>;
  firstFailure?: string;
  /** Every response's latency, ms. */
  latencies: Float64Array;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function summarise(parts: Omit<LoadResult, 'rps' | 'p50' | 'p99' | 'max'>): LoadResult {
  const sorted = Float64Array.from(parts.latencies).sort();
  return {
    ...parts,
    latencies: sorted,
    rps: parts.completed / Math.max(parts.seconds, 1e-9),
    p50: Math.round(percentile(sorted, 50)),
    p99: Math.round(percentile(sorted, 99)),
    max: Math.round(sorted[sorted.length - 1] ?? 0),
  };
}

/**
 * `seconds` of load, or with `amount` that many requests (split evenly between the
 * connections; autocannon then ignores the duration). autocannon notices the end only at its
 * next sample tick, so with `amount` the ticks are 100 ms apart and the seconds are from the
 * start to the last response.
 */
export async function runLoad(url: string, script: Script, options: { connections: number; seconds: number } | { connections: number; amount: number }): Promise<LoadResult> {
  let connection = 0;
  const statuses: Record<string, number> = {};
  let firstFailure: string | undefined;
  const latencies: number[] = [];
  const began = performance.now();
  let lastResponse = began;
  const instance = autocannon({
    url,
    connections: options.connections,
    ...('amount' in options ? { amount: options.amount, sampleInt: 100 } : { duration: options.seconds }),
    setupClient: (client) => {
      const next = script(connection++);
      client.setRequests([
        {
          setupRequest: (request) => {
            const r = next();
            const headers: Record<string, string> = { ...(request.headers as Record<string, string>), ...r.headers, authorization: r.token };
            if (r.body !== undefined) headers['content-type'] = 'application/json';
            return {
              ...request,
              method: r.method,
              path: r.path,
              headers,
              body: r.body === undefined ? undefined : JSON.stringify(r.body),
            };
          },
          onResponse: (status, body) => {
            statuses[status] = (statuses[status] ?? 0) + 1;
            if ((status < 200 || status > 299) && firstFailure === undefined) firstFailure = `${status} ${body.slice(0, 300)}`;
          },
        },
      ]);
    },
  });
  // The promise autocannon returns is also its event emitter.
  (instance as unknown as autocannon.Instance).on('response', (_client, _status, _bytes, responseTime) => {
    latencies.push(responseTime);
    lastResponse = performance.now();
  });
  const result = await instance;
  return summarise({
    seconds: 'amount' in options ? (lastResponse - began) / 1000 : result.duration,
    completed: result.requests.total,
    sent: result.requests.sent,
    non2xx: result.non2xx,
    errors: result.errors,
    statuses,
    firstFailure,
    latencies: Float64Array.from(latencies),
  });
}

/** One result from slices of the same scenario: summed counts, percentiles over all responses. */
export function mergeLoads(slices: LoadResult[]): LoadResult {
  const statuses: Record<string, number> = {};
  for (const s of slices) for (const [code, n] of Object.entries(s.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
  const latencies = new Float64Array(slices.reduce((a, s) => a + s.latencies.length, 0));
  let at = 0;
  for (const s of slices) {
    latencies.set(s.latencies, at);
    at += s.latencies.length;
  }
  return summarise({
    seconds: slices.reduce((a, s) => a + s.seconds, 0),
    completed: slices.reduce((a, s) => a + s.completed, 0),
    sent: slices.reduce((a, s) => a + s.sent, 0),
    non2xx: slices.reduce((a, s) => a + s.non2xx, 0),
    errors: slices.reduce((a, s) => a + s.errors, 0),
    statuses,
    firstFailure: slices.find((s) => s.firstFailure)?.firstFailure,
    latencies,
  });
}
