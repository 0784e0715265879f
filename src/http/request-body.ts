/**
 * How both doors read a request body (API-CONTRACT.md §1; RFC 8259 §8.1), in one place so
 * that /api and /trpc answer the same bytes alike:
 *
 * - `application/json`, with no `charset` or `charset=utf-8`: JSON on the wire is UTF-8. Any
 *   other media type or charset is 415 `unsupported_media_type`, and so is a
 *   `Content-Encoding` other than `identity` (the service decodes none: gzip was inflated on
 *   one door and refused on the other);
 * - at most 100 KiB (413 `payload_too_large`, the rest left unread);
 * - valid UTF-8 (400 `invalid_json`: a byte that is no UTF-8 is never replaced and stored);
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
import { BODY_LIMIT_BYTES } from '../core/limits.js';
import { nestsDeeperThan } from './json-depth.js';

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/** Why the Content-Type or Content-Encoding refuses the body; undefined when it is UTF-8 JSON, unencoded. */
export function mediaTypeRefusal(req: Pick<IncomingMessage, 'headers'>): DomainError | undefined {
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    return DomainError.of('unsupported_media_type', { detail: 'Send the request body unencoded: no Content-Encoding is supported.' });
  }
  const contentType = req.headers['content-type'];
  const mediaType = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  if (mediaType !== 'application/json') return DomainError.of('unsupported_media_type');
  const charset = CHARSET.exec(contentType!)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return DomainError.of('unsupported_media_type', { detail: 'JSON is sent as UTF-8: no other charset is supported.' });
  }
  return undefined;
}

export const NOT_UTF8_DETAIL = 'The request body is not valid UTF-8.';

/** Whether the text's bytes (or a URL-decoded query value) refuse it: not UTF-8, or nested too deep. */
export function textRefusal(bytes: Uint8Array): DomainError | undefined {
  if (!isUtf8(bytes)) return DomainError.of('invalid_json', { detail: NOT_UTF8_DETAIL });
  if (nestsDeeperThan(bytes)) return DomainError.of('invalid_json', { detail: TOO_DEEP_DETAIL });
  return undefined;
}

export type BodyRead = { text: string } | { refusal: DomainError };

/**
 * How much of an oversized body is read (and dropped) so that the client, still sending it,
 * gets the 413 on a connection that stays usable; a body larger than this has its connection
 * closed once the answer is out.
 */
export const DRAINED_BYTES = 4 * 1024 * 1024;

/**
 * Reads the body up to the limit and checks its bytes. A body over the limit is refused at
 * once; the rest of it is read and dropped (up to DRAINED_BYTES), as a client that is still
 * sending expects its answer on a connection whose request has been read.
 */
export function readBody(req: IncomingMessage, limit = BODY_LIMIT_BYTES): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onEnd);
      req.off('aborted', onEnd);
    };
    const drop = (chunk: Buffer) => {
      size += chunk.length;
      if (size > DRAINED_BYTES) {
        req.off('data', drop);
        req.pause();
        // Past what is worth reading: the connection ends once the answer is out.
        const { res } = req as IncomingMessage & { res?: ServerResponse };
        if (res && !res.writableFinished) {
          if (!res.headersSent) res.setHeader('Connection', 'close');
          res.once('finish', () => req.socket.destroy());
        } else {
          req.socket.destroy();
        }
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        chunks.length = 0;
        req.on('data', drop);
        resolve({ refusal: DomainError.of('payload_too_large') });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      const bytes = Buffer.concat(chunks);
      const refusal = textRefusal(bytes);
      resolve(refusal ? { refusal } : { text: bytes.toString('utf8') });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onEnd);
    req.on('aborted', onEnd);
  });
}
