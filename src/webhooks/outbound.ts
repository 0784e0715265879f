/**
 * One delivery attempt of a webhook over the network (API-CONTRACT.md §14): a single POST to a
 * URL whose host is resolved and checked at this attempt (src/webhooks/address-guard.ts) and
 * then connected to at exactly the checked address, so that a resolver answering differently
 * between the check and the connect (DNS rebinding) cannot steer the request elsewhere. No
 * redirect is followed, the response is read to a bound, the whole attempt (resolution,
 * connect, headers, body) to a time limit; the outcome is a value, never an exception.
 *
 * Connections are kept alive between attempts, in a pool per checked address (and host name,
 * port, scheme): a socket of it was connected to that address, so reusing it sends the request
 * nowhere else than a new connection would. A receiver that takes a delivery after another
 * costs no new TCP and TLS handshake each time. A response not read to its end (the bound,
 * the time limit, an error) ends its connection.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { checkUrlShape, resolveChecked, type Resolve, type ResolvedAddress } from './address-guard.js';

/** Most bytes of a response body read before the connection is dropped. */
export const MAX_RESPONSE_BYTES = 16 * 1024;

const USER_AGENT = 'planning-service-webhooks/1';
/** Longest delay setTimeout keeps (a larger one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Headers the request itself sets: a caller's value for them is dropped. */
const OWN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);

export interface OutboundResult {
  outcome: 'delivered' | 'failed' | 'blocked';
  /** The response's status; null when no response arrived. */
  httpStatus: number | null;
  /** Short text: 'timeout', 'connection closed', 'redirect not followed (302)', 'HTTP 500', why the address is blocked... */
  error: string | null;
  /** The Retry-After of a 429 or 503 (delta seconds or HTTP date), in seconds from now. */
  retryAfterSeconds: number | null;
  durationMs: number;
}

export interface PostOptions {
  /** The whole attempt's limit: resolution, connect, headers and body read. */
  timeoutMs: number;
  /** `WEBHOOK_ALLOW_PRIVATE_URLS`: `http:` and any address allowed. */
  allowPrivate: boolean;
  resolve?: Resolve;
  /** Ends the attempt early (as failed, 'aborted'), as at shutdown. */
  signal?: AbortSignal;
  /** Wall clock in epoch milliseconds, to read an HTTP-date Retry-After (default Date.now). */
  now?: () => number;
}

/** Kept-alive connections per checked address; the least recently used pool is closed past POOLS. */
const pools = new Map<string, http.Agent>();
const POOLS = 256;

function poolFor(secure: boolean, address: ResolvedAddress, host: string, port: number): http.Agent {
  const key = `${secure ? 'https' : 'http'} ${address.address} ${host} ${port}`;
  let agent = pools.get(key);
  if (agent) {
    pools.delete(key); // to the end: the most recently used
  } else {
    // An idle connection is let go after 4 s, before the 5 s a Node server keeps one by default.
    const options = { keepAlive: true, keepAliveMsecs: 1_000, maxSockets: 8, maxFreeSockets: 2, timeout: 4_000 };
    agent = secure ? new https.Agent(options) : new http.Agent(options);
    if (pools.size >= POOLS) {
      const [oldest, old] = pools.entries().next().value!;
      pools.delete(oldest);
      // Its idle connections close now; one in use ends with its request (nothing takes it back).
      for (const idle of Object.values(old.freeSockets)) for (const socket of idle ?? []) socket.destroy();
    }
  }
  pools.set(key, agent);
  return agent;
}

/** What the response's status decides, before the duration is known. */
type Decision = Omit<OutboundResult, 'durationMs'>;

/**
 * POSTs `body` to `url` once: resolves and checks the address (resolveChecked), connects to
 * exactly that address (the request's `lookup` answers it; TLS servername and Host stay the
 * URL's host), never follows redirects, reads at most MAX_RESPONSE_BYTES of the response and
 * then destroys it, gives up after timeoutMs as a whole. 2xx → delivered; 3xx/4xx/5xx →
 * failed with httpStatus; network error or timeout → failed with httpStatus null; refused
 * address → blocked (no connection made). Never throws.
 *
 * The status decides: once it has arrived in time, the body is read until it ends, the bound
 * is reached or the time limit falls, and none of these changes the outcome (a 200 whose body
 * trickles past the limit is delivered; the receiver has answered).
 */
export async function postOnce(url: string, headers: Record<string, string>, body: string, options: PostOptions): Promise<OutboundResult> {
  const started = performance.now();
  const finished = (decision: Decision): OutboundResult => ({ ...decision, durationMs: Math.round(performance.now() - started) });
  try {
    const shape = checkUrlShape(url, options.allowPrivate, { kept: true });
    if ('refused' in shape) return finished(blocked(shape.refused));

    // One signal for the attempt: the time limit, or the caller's own.
    const stop = new AbortController();
    const limit = Number.isFinite(options.timeoutMs) ? Math.min(Math.max(0, options.timeoutMs), MAX_TIMER_MS) : 0;
    const timer = setTimeout(() => stop.abort('timeout'), limit);
    const onCallerAbort = () => stop.abort('aborted');
    if (options.signal?.aborted) onCallerAbort();
    else options.signal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      const checked = await untilStopped(resolveChecked(shape.url, { allowPrivate: options.allowPrivate, resolve: options.resolve }), stop.signal);
      if (checked === undefined) return finished(failed(null, String(stop.signal.reason)));
      if ('refused' in checked) return finished(blocked(checked.refused));
      return finished(await send(shape.url, checked.address, headers, body, stop.signal, options.now ?? Date.now));
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onCallerAbort);
    }
  } catch (error) {
    return finished(failed(null, describeError(error)));
  }
}

function blocked(reason: string): Decision {
  return { outcome: 'blocked', httpStatus: null, error: reason, retryAfterSeconds: null };
}

function failed(httpStatus: number | null, error: string): Decision {
  return { outcome: 'failed', httpStatus, error, retryAfterSeconds: null };
}

/** The promise's value, or undefined as soon as `signal` aborts (the promise is left to settle alone). */
function untilStopped<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The request itself, to the checked address; settles once, whatever happens. */
function send(
  url: URL, address: ResolvedAddress, headers: Record<string, string>, body: string, stop: AbortSignal, now: () => number, reuse = true,
): Promise<Decision> {
  return new Promise<Decision>((resolve) => {
    if (stop.aborted) return resolve(failed(null, String(stop.reason)));
    const secure = url.protocol === 'https:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;

    // Whatever name Node asks for, the answer is the address that was checked; Node asks for
    // a list ({all: true}) when it tries several families, for one address otherwise.
    const lookup: net.LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions?.all) callback(null, [{ address: address.address, family: address.family }]);
      else callback(null, address.address, address.family);
    };

    const outgoing: Record<string, string | number> = { 'user-agent': USER_AGENT };
    for (const [name, value] of Object.entries(headers)) {
      if (!OWN_HEADERS.has(name.toLowerCase())) outgoing[name.toLowerCase()] = value;
    }
    outgoing['content-length'] = Buffer.byteLength(body);

    let decision: Decision | null = null;
    let response: http.IncomingMessage | null = null;
    let settled = false;
    /** `read`: the response was read to its end, and its connection may serve another attempt. */
    const settle = (result: Decision, read = false) => {
      if (settled) return;
      settled = true;
      stop.removeEventListener('abort', onStop);
      if (!read) {
        response?.destroy();
        request.destroy();
      }
      resolve(result);
    };
    const onStop = () => settle(decision ?? failed(null, String(stop.reason)));

    const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    const request = (secure ? https : http).request({
      method: 'POST',
      host,
      port,
      path: `${url.pathname}${url.search}`,
      headers: outgoing,
      agent: reuse ? poolFor(secure, address, host, port) : false,
      lookup,
      insecureHTTPParser: false,
      // SNI carries a name, never an address (RFC 6066).
      ...(secure && net.isIP(host) === 0 ? { servername: host } : {}),
    });
    stop.addEventListener('abort', onStop, { once: true });

    request.on('error', (error) => {
      // A kept-alive connection the receiver closed as this request went out (its idle timeout):
      // nothing reached it, so the request goes again at once on a new connection (Node's
      // documented way, `reusedSocket`), not after the retry schedule's first wait.
      const code = (error as { code?: unknown }).code;
      if (!settled && decision === null && request.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE') && !stop.aborted) {
        settled = true;
        stop.removeEventListener('abort', onStop);
        request.destroy();
        resolve(send(url, address, headers, body, stop, now, false));
        return;
      }
      settle(decision ?? failed(null, describeError(error)));
    });
    request.on('response', (res) => {
      response = res;
      decision = decide(res, now);
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= MAX_RESPONSE_BYTES) settle(decision!);
      });
      res.on('end', () => settle(decision!, true));
      res.on('error', () => settle(decision!));
      res.on('close', () => settle(decision!));
    });
    request.end(body);
  });
}

/** The outcome a response's status gives. */
function decide(res: http.IncomingMessage, now: () => number): Decision {
  const status = res.statusCode ?? 0;
  if (status >= 200 && status < 300) return { outcome: 'delivered', httpStatus: status, error: null, retryAfterSeconds: null };
  const error = status >= 300 && status < 400 ? `redirect not followed (${status})` : `HTTP ${status}`;
  const retryAfterSeconds = status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after'], now()) : null;
  return { outcome: 'failed', httpStatus: status, error, retryAfterSeconds };
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
/** The three forms of an HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, RFC 850, asctime; all UTC. */
const IMF_FIXDATE = /^[A-Z][a-z]{2}, (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC_850 = /^[A-Z][a-z]+, (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** An HTTP-date as epoch milliseconds, or null when the text is not one. */
function parseHttpDate(text: string, nowMs: number): number | null {
  let parts: [day: string, month: string, year: number, hour: string, minute: string, second: string] | null = null;
  let m = IMF_FIXDATE.exec(text);
  if (m) parts = [m[1]!, m[2]!, Number(m[3]), m[4]!, m[5]!, m[6]!];
  else if ((m = RFC_850.exec(text))) {
    // A two-digit year is the most recent one ending so (RFC 9110: not more than 50 years ahead).
    const yy = Number(m[3]);
    const thisYear = new Date(nowMs).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + yy;
    if (year > thisYear + 50) year -= 100;
    parts = [m[1]!, m[2]!, year, m[4]!, m[5]!, m[6]!];
  } else if ((m = ASCTIME.exec(text))) parts = [m[2]!.trim(), m[1]!, Number(m[6]), m[3]!, m[4]!, m[5]!];
  if (!parts) return null;
  const month = MONTHS.indexOf(parts[1]);
  if (month < 0) return null;
  const ms = Date.UTC(parts[2], month, Number(parts[0]), Number(parts[3]), Number(parts[4]), Number(parts[5]));
  return Number.isFinite(ms) ? ms : null;
}

/** A Retry-After header in seconds from `nowMs`: delta seconds, or an HTTP-date (a past one is 0); null when absent or unreadable. */
function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? seconds : null;
  }
  const at = parseHttpDate(text, nowMs);
  return at === null ? null : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/** A network error as short text for the delivery log. */
function describeError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    switch (code) {
      case 'ECONNREFUSED':
        return 'connection refused';
      case 'ECONNRESET':
      case 'EPIPE':
        return 'connection closed';
      case 'EHOSTUNREACH':
        return 'host unreachable';
      case 'ENETUNREACH':
        return 'network unreachable';
      case 'ETIMEDOUT':
        return 'connection timed out';
    }
    if (code.startsWith('HPE_')) return `invalid HTTP response (${code})`;
    if (code === 'EPROTO' || /^ERR_(TLS|SSL)|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return `TLS error (${code})`;
    return `connection error (${code})`;
  }
  return error instanceof Error ? error.message.slice(0, 200) : 'request error';
}
