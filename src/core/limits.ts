/**
 * The sizes the service holds every request to (API-CONTRACT.md §1), in one place: the doors
 * enforce them (src/http/) and the OpenAPI document states them (src/openapi/).
 */

/** Request bodies larger than this are 413 `payload_too_large`. */
export const BODY_LIMIT_BYTES = 100 * 1024;
/**
 * Arrays and objects nested deeper than this are 400 `invalid_json`; `{"task":{"order":1}}`
 * is 2 deep. Checked on the raw text by src/http/json-depth.ts.
 */
export const MAX_JSON_DEPTH = 64;
/** A /trpc batch holds at most this many calls (more is 400 `batch_too_large` for each). */
export const MAX_BATCH_CALLS = 20;

/** Most items a list page may hold (`page_size`, API-CONTRACT.md §12). */
export const MAX_PAGE_SIZE = 200;
/** Most values a comma list of a list's query (`state`, `project_id`) may hold. */
export const MAX_LIST_VALUES = 100;
/** Longest `q` of a list's query, in code points. */
export const MAX_SEARCH_LENGTH = 100;
