/**
 * How both doors read a request body (API-CONTRACT.md §1; RFC 8259 §8.1), in one place so
 * that /api and /trpc answer the same bytes alike:
 *
 * - `application/json`, with no `charset` or `charset=utf-8`: JSON on the wire is UTF-8. Any
 *   other media type or charset is 415 `unsupported_media_type`, and so is a
 *   `Content-Encoding` other than `identity` (the service decodes none: gzip was inflated on
 *   one door and refused on the other);
 * - at most 100 KiB (413 `payload_too_large`);
 * - all of it: a body cut off before its end (the client gone, a chunked body without its
 *   last chunk) is refused, never acted on;
 * - valid UTF-8 (400 `invalid_json`: a byte that is no UTF-8 is never replaced and stored),
 *   a leading byte order mark dropped (RFC 8259 §8.1 lets a parser ignore it; tRPC's Fetch
 *   decoding always did);
 * - arrays and objects at most 64 levels deep, checked on the raw bytes (400 `invalid_json`):
 *   with the charset pinned to UTF-8, the bytes the scan reads are the text JSON.parse reads.
 *
 * A refusal is not answered here: the door hands it to the procedure, which raises it once
 * the caller is authenticated (src/core/procedures.ts), so an anonymous caller learns nothing
 * from validation and both doors check in one order.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DomainError, TOO_DEEP_DETAIL } from '../core/errors.js';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from '../core/limits.js';
import { nestsDeeperThan } from './json-depth.js';

/** A parameter of a media type (RFC 9110 §5.6.6): its name, and its value unquoted. */
const PARAMETER = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*(?:"([^"]*)"|([^";\s]*))$/;

/** Why the Content-Type or Content-Encoding refuses the body; undefined when it is UTF-8 JSON, unencoded. */
export function mediaTypeRefusal(req: Pick<IncomingMessage, 'headers'>): DomainError | undefined {
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    return DomainError.of('unsupported_media_type', { detail: 'Send the request body unencoded: no Content-Encoding is supported.' });
  }
  const contentType = req.headers['content-type'];
  const mediaType = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  if (mediaType !== 'application/json') return DomainError.of('unsupported_media_type');
  // API-CONTRACT.md §1: `application/json`, with a `; charset=utf-8` suffix or none; anything else is 415.
  for (const parameter of contentType!.split(';').slice(1).map((p) => p.trim())) {
    if (parameter === '') continue;
    const [, name, quoted, plain] = PARAMETER.exec(parameter) ?? [];
    if (name?.toLowerCase() !== 'charset') {
      return DomainError.of('unsupported_media_type', { detail: 'Content-Type carries no parameter but charset=utf-8.' });
    }
    const charset = (quoted ?? plain ?? '').toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') {
      return DomainError.of('unsupported_media_type', { detail: 'JSON is sent as UTF-8: no other charset is supported.' });
    }
  }
  return undefined;
}

/**
 * A request sent with no body and no media type: API-CONTRACT.md §1 holds only requests with a
 * body to application/json, so it is one without input (a missing wrapper is then 422).
 */
export function bodilessUntyped(req: Pick<IncomingMessage, 'headers'>): boolean {
  return !carriesBody(req) && req.headers['content-type'] === undefined;
}

/** A body is on its way: announced by a non-zero Content-Length or by Transfer-Encoding. */
export function carriesBody(req: Pick<IncomingMessage, 'headers'>): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length']) > 0;
}

const HEX_PAIR = /^[0-9A-Fa-f]{2}$/;

/** The bytes a form-encoded query value stands for (`+` a space, `%XX` a byte; a stray `%` stays itself). */
export function percentDecodedBytes(value: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x25 && HEX_PAIR.test(value.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(value.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (c === 0x2b) {
      bytes.push(0x20);
    } else if (c < 0x80) {
      bytes.push(c);
    } else {
      bytes.push(...Buffer.from(value[i]!, 'utf8'));
    }
  }
  return Buffer.from(bytes);
}

const NOT_UTF8_DETAIL = 'The request body is not valid UTF-8.';

/**
 * The text of the bytes, or why they are refused: not UTF-8, or nested too deep (`envelope`: the
 * levels a door wraps the input in, which the limit does not count).
 */
export function textOf(bytes: Uint8Array, envelope = 0): { text: string } | { refusal: DomainError } {
  if (!isUtf8(bytes)) return { refusal: DomainError.of('invalid_json', { detail: NOT_UTF8_DETAIL }) };
  if (nestsDeeperThan(bytes, MAX_JSON_DEPTH + envelope)) return { refusal: DomainError.of('invalid_json', { detail: TOO_DEEP_DETAIL }) };
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return { text: text.charCodeAt(0) === 0xfeff ? text.slice(1) : text };
}

/**
 * Requests whose client asked `Expect: 100-continue` and was not told to go on (its declared
 * body is over the limit: src/http/http-server.ts): their body will not come.
 */
export const continueWithheld = new WeakSet<IncomingMessage>();

export type BodyRead = { bytes: Buffer } | { refusal: DomainError };

const tooLarge = () => DomainError.of('payload_too_large');
const cutOff = () => DomainError.of('invalid_json', { detail: 'The request body did not arrive in full.' });

/**
 * Reads the whole body, keeping at most `limit` bytes. A body over the limit is read to its
 * end and dropped, then refused: a client that sends all of its body before it reads gets its
 * answer (answering earlier and closing makes its writes fail); Node's request timeout bounds
 * how long that takes. A client that waits for a 100 Continue it was not sent sends nothing
 * more: it is refused at once, and the connection ends with the answer.
 */
export function readBody(req: IncomingMessage, limit = BODY_LIMIT_BYTES): Promise<BodyRead> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    if (declared > limit && continueWithheld.has(req)) {
      const { res } = req as IncomingMessage & { res?: ServerResponse };
      if (res && !res.headersSent) res.setHeader('Connection', 'close');
      resolve({ refusal: tooLarge() });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onCut);
      req.off('aborted', onCut);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (over) return;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(!req.complete ? { refusal: cutOff() } : over ? { refusal: tooLarge() } : { bytes: Buffer.concat(chunks) });
    };
    const onCut = () => {
      cleanup();
      resolve({ refusal: cutOff() });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onCut);
    req.on('aborted', onCut);
    // Declared over the limit: kept from its first byte, and still read to its end.
    if (declared > limit) over = true;
  });
}
