/**
 * What every request is held to before anything that depends on its path or its host runs
 * (API-CONTRACT.md §1, §2, §7; RFC 9112 §3.2, §6.1):
 *
 * - `normaliseTarget`: the request target is read once, as a URL parser reads it, and every
 *   later step sees that one path. Dot segments (`/x/../api`, `%2e%2e`) are resolved and a
 *   backslash is a slash, as the REST routes always matched them; before, the middleware that
 *   sets `Cache-Control: no-store` on /api and /trpc saw the raw target and the router the
 *   resolved one, so `/x/../api/users/me` reached a procedure without the header. A target
 *   starting with `//` or `/\` stays a path (it names no host, and no route); an absolute-form
 *   target keeps only its path and query.
 * - `checkFraming`: a request without a Host (HTTP/1.1), with several, or with one that is not
 *   a host is 400 `malformed_request`, as is one of another major version than HTTP/1 or with
 *   several Authorization or Content-Type lines; links are built from the host that passed this check
 *   (`requestOrigin`). A transfer coding other than `chunked` is 501 `not_implemented`: Node
 *   decodes chunked only, and a `gzip, chunked` body read as plain chunked would be garbage
 *   taken for JSON.
 *
 * Each refusal answers in the shape of the request's door: a tRPC error under /trpc
 * (src/http/door-errors.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler } from 'express';
import { DomainError } from '../core/errors.js';
import { sendRefusal } from './door-errors.js';

/** Origin-form targets are resolved against this; only the path and query are kept. */
const PLACEHOLDER_ORIGIN = 'http://127.0.0.1';

/** The target as the service reads it: path (dot segments resolved, `\` as `/`) and query, and the authority of an absolute-form one; undefined when it is no http(s) URL. */
function parsedTarget(target: string): { path: string; authority?: string } | undefined {
  const originForm = target.startsWith('/');
  let url: URL;
  try {
    url = new URL(originForm ? `${PLACEHOLDER_ORIGIN}${target}` : target);
  } catch {
    return undefined;
  }
  // The absolute form names an http(s) resource (RFC 9112 §3.2.2), nothing else.
  if (!originForm && url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  return { path: `${url.pathname}${url.search}`, authority: originForm ? undefined : url.host };
}

/**
 * The path of a target as the service reads it, for the door its refusal answers in
 * (src/http/door-errors.ts), also when the target is no URL the service reads: then the path
 * as written after an absolute form's scheme and authority (`http://a:99999/trpc/…`).
 */
export function pathOfTarget(target: string): string {
  return parsedTarget(target)?.path ?? /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*(.*)$/s.exec(target)?.[1] ?? target;
}

/** Requests whose target is no URL the service reads (`http://a:99999/…`, `foo://x/…`): 400 `malformed_request`. */
const unreadableTargets = new WeakSet<IncomingMessage>();

/**
 * Rewrites the request's target as `parsedTarget` reads it. Done by the server before the
 * app sees the request (src/http/http-server.ts): Express's router keeps an absolute-form
 * target's scheme and host by their length, so the target cannot change under it. A target
 * that is no URL at all (`*`) is left as it is: no route matches it (404).
 */
export function normaliseTarget(req: IncomingMessage): void {
  const target = parsedTarget(req.url ?? '/');
  if (target === undefined) {
    // The asterisk form (`OPTIONS *`) asks about the server as a whole: no route answers it (404).
    if (req.url !== '*') unreadableTargets.add(req);
    return;
  }
  req.url = target.path;
  // An absolute-form target names the host itself, in place of the Host header (RFC 9112 §3.2.2).
  if (target.authority) req.headers.host = target.authority;
}

/**
 * A host as links may carry it: a DNS name or IPv4 address (dot-separated labels of letters,
 * digits, `-` and `_` that start and end with a letter or digit, at most 253 characters), or an
 * IPv6 literal in brackets; then an optional port from 1 to 65535, with no leading zero.
 */
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?';
const HOST = new RegExp(`^(?:(?=[^:]{1,254}(?::|$))${LABEL}(?:\\.${LABEL})*\\.?|\\[[0-9A-Fa-f:.]{2,45}\\])(?::([1-9][0-9]{0,4}))?$`);

function validHost(host: string | undefined): host is string {
  const match = host === undefined ? null : HOST.exec(host);
  return match !== null && (match[1] === undefined || Number(match[1]) <= 65_535);
}

/** The address the client connected to, as a host (HTTP/1.0 may omit Host). */
function localHost(req: Request): string {
  const address = req.socket.localAddress ?? '127.0.0.1';
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  const name = plain.includes(':') ? `[${plain}]` : plain;
  return req.socket.localPort ? `${name}:${req.socket.localPort}` : name;
}

/** How many lines of the header `name` (lower case) the request carries. */
function headerLines(req: Request, name: string): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === name) count++;
  return count;
}

/**
 * Headers that hold one value, beside Host: Node keeps the first of several and drops the rest,
 * where a proxy in front may read the last (two Authorization lines are two callers).
 */
const SINGLE_HEADERS = { authorization: 'Authorization', 'content-type': 'Content-Type' } as const;

const ORIGIN = Symbol('request origin');
type FramedRequest = Request & { [ORIGIN]?: string };

/**
 * Scheme and host of the links of this request's answer (API-CONTRACT.md §7): Express's
 * `req.protocol` and `req.host` (X-Forwarded-Proto/-Host when TRUST_PROXY trusts the proxy),
 * as `checkFraming` validated them.
 */
export function requestOrigin(req: Request): string {
  const known = (req as FramedRequest)[ORIGIN];
  if (known !== undefined) return known;
  const origin = originOf(req);
  return origin ?? `http://${localHost(req)}`;
}

function originOf(req: Request): string | undefined {
  const protocol = req.protocol === 'https' ? 'https' : 'http';
  // Express's host: the trusted proxy's X-Forwarded-Host, else Host; with neither (HTTP/1.0),
  // the address the client connected to.
  const host = req.host ?? (req.headers.host === undefined ? localHost(req) : undefined);
  return validHost(host) ? `${protocol}://${host.toLowerCase()}` : undefined;
}

/** The transfer codings Node decodes: `chunked`, alone. */
function decodableTransferEncoding(value: string | undefined): boolean {
  return value === undefined || value.trim().toLowerCase() === 'chunked';
}

export const checkFraming: RequestHandler = (req, res, next) => {
  if (unreadableTargets.has(req)) {
    sendRefusal(req, res, DomainError.of('malformed_request', { detail: 'The request target is not a URL this service reads.' }), pathOfTarget(req.url));
    return;
  }
  if (req.httpVersionMajor !== 1) {
    // Node's parser lets any one-digit major version through; this service speaks HTTP/1.x.
    sendRefusal(req, res, DomainError.of('malformed_request', { detail: 'The request line must name HTTP/1.0 or HTTP/1.1.' }));
    return;
  }
  for (const [name, shown] of Object.entries(SINGLE_HEADERS)) {
    if (headerLines(req, name) > 1) {
      sendRefusal(req, res, DomainError.of('malformed_request', { detail: `A request must carry one ${shown} header, not several.` }));
      return;
    }
  }
  const lines = headerLines(req, 'host');
  const missing = lines === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1;
  const origin = missing || lines > 1 ? undefined : originOf(req);
  if (origin === undefined) {
    const detail = missing
      ? 'An HTTP/1.1 request must carry a Host header.'
      : lines > 1
        ? 'A request must carry one Host header, not several.'
        : 'The Host header (or the forwarded host) is not a valid host.';
    sendRefusal(req, res, DomainError.of('malformed_request', { detail }));
    return;
  }
  if (!decodableTransferEncoding(req.headers['transfer-encoding'])) {
    const detail = 'Only the chunked transfer coding is supported: send the body with Content-Length, or chunked alone.';
    res.setHeader('Connection', 'close');
    sendRefusal(req, res, DomainError.of('not_implemented', { detail }));
    return;
  }
  (req as FramedRequest)[ORIGIN] = origin;
  next();
};
