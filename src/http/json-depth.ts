/**
 * The nesting limit of API-CONTRACT.md §1: a body (or a tRPC query input) whose arrays and
 * objects nest more than MAX_JSON_DEPTH levels is refused as 400 `invalid_json` before any
 * library walks it. Libraries on the request path recurse over parsed values (tRPC's
 * `createBody` stringifies the parsed body again, superjson walks its metadata), and a few
 * thousand levels overflow Node's stack; this scan is a loop over the raw text and costs one
 * pass over at most 100 KiB.
 */

import { MAX_JSON_DEPTH } from '../core/limits.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/**
 * True when the JSON text, as UTF-8 bytes, opens more than `limit` arrays or objects inside
 * one another. Brackets inside strings do not count. For text that is not JSON the answer is
 * only a heuristic, but such text is refused as `invalid_json` anyway. Only UTF-8 is read
 * (src/http/request-body.ts refuses every other charset): every byte the scan looks at is
 * ASCII, and no byte of a multi-byte UTF-8 sequence is, so it sees the text JSON.parse sees.
 */
export function nestsDeeperThan(bytes: Uint8Array, limit = MAX_JSON_DEPTH): boolean {
  const length = bytes.length;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}
