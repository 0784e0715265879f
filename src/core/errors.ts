/**
 * The one catalogue of errors (API-CONTRACT.md §2): every code the service answers with, its
 * HTTP status, title and default detail. The `ErrorCode` type, every envelope (src/core/
 * failures.ts turns any failure into one) and openapi.json's codes are derived from it.
 *
 * Touch this file to add or reword an error; nothing else lists codes or statuses.
 */
import type { ZodError } from 'zod';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from './limits.js';

export const TOO_DEEP_DETAIL = `The request body nests arrays or objects more than ${MAX_JSON_DEPTH} levels deep.`;


interface ErrorSpec {
  status: number;
  title: string;
  detail: string;
}

const VALIDATION = 'Resource validation failed';
const STATE = 'State change refused';

export const ERROR_CATALOGUE = {
  parameter_missing: { status: 422, title: VALIDATION, detail: 'This attribute is required.' },
  invalid: { status: 422, title: VALIDATION, detail: 'This value is not valid.' },
  too_long: { status: 422, title: VALIDATION, detail: 'This value is too long.' },
  too_short: { status: 422, title: VALIDATION, detail: 'This value is too short.' },
  taken: { status: 422, title: VALIDATION, detail: 'This value is already taken.' },
  limit_reached: { status: 422, title: VALIDATION, detail: 'You have as many of these as a user may have.' },
  must_be_set: { status: 422, title: STATE, detail: 'This attribute must be set.' },
  cannot_be_set: { status: 422, title: STATE, detail: 'This attribute cannot be set here.' },
  cannot_be_before_started_at: { status: 422, title: STATE, detail: 'This date cannot be before the start.' },
  cannot_be_after_today: { status: 422, title: STATE, detail: 'This date cannot be after today.' },
  reached_max_started: { status: 422, title: STATE, detail: 'Too many projects are started at the same time.' },
  invalid_transition: { status: 422, title: STATE, detail: 'The resource cannot reach the given state.' },
  record_not_found: { status: 404, title: 'Record not found', detail: 'No record with this id exists for the current user.' },
  unauthorized: { status: 401, title: 'Unauthorized', detail: 'A valid access token is required in the Authorization header.' },
  insufficient_scope: { status: 403, title: 'Insufficient scope', detail: 'This token does not have the scope this operation needs.' },
  login_failed: { status: 401, title: 'Login failed', detail: 'The username or the password is wrong.' },
  missing_endpoint: { status: 404, title: 'Endpoint not found', detail: 'No endpoint answers this method and path.' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type', detail: 'Send the request body as UTF-8 application/json.' },
  invalid_json: { status: 400, title: 'Invalid JSON', detail: 'The request body is not valid JSON.' },
  batch_too_large: { status: 400, title: 'Batch too large', detail: 'A tRPC batch holds too many calls.' },
  payload_too_large: { status: 413, title: 'Payload too large', detail: `The request body is larger than ${BODY_LIMIT_BYTES / 1024} KiB.` },
  headers_too_large: { status: 431, title: 'Request headers too large', detail: 'The request line and headers must stay under 16 KiB.' },
  malformed_request: { status: 400, title: 'Malformed request', detail: 'The request is not valid HTTP.' },
  expectation_failed: { status: 417, title: 'Expectation failed', detail: 'The only expectation this service meets is Expect: 100-continue.' },
  not_implemented: { status: 501, title: 'Not implemented', detail: 'This service does not support what the request asks of HTTP.' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused', detail: 'This Idempotency-Key was already used with a different request.' },
  request_in_progress: { status: 409, title: 'Request in progress', detail: 'A request with this Idempotency-Key is still running; retry shortly.' },
  precondition_failed: { status: 412, title: 'Precondition failed', detail: 'The resource changed since the version named by If-Match.' },
  rate_limited: { status: 429, title: 'Too many requests', detail: 'Too many requests; retry later.' },
  internal_error: { status: 500, title: 'Internal server error', detail: 'Something went wrong on our side; the request id identifies it in our logs.' },
  cursor_expired: { status: 410, title: 'Cursor expired', detail: 'Events after this id are no longer kept: reload your lists, then follow the log from meta.last_event_id.' },
  unavailable: { status: 503, title: 'Service unavailable', detail: 'The database cannot be reached right now; try again shortly.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;
export const ERROR_CODES = Object.keys(ERROR_CATALOGUE) as [ErrorCode, ...ErrorCode[]];

/** What the error is about: a member of the body, a query parameter, or a request header (API-CONTRACT.md §2, §15). */
export interface ErrorSource {
  pointer?: string;
  parameter?: string;
  header?: string;
}

/** One member of the `errors` array, exactly as it goes on the wire. */
export interface ApiError {
  status: string;
  code: ErrorCode;
  title: string;
  detail: string;
  source?: ErrorSource;
}

export interface ErrorOptions extends ErrorSource {
  /** This occurrence; the catalogue's default detail when omitted. */
  detail?: string;
  /** Only where one code answers with several statuses (`invalid` on a query parameter is 400). */
  status?: number;
}

/** An error of the catalogue, with what this occurrence adds. */
export function apiError(code: ErrorCode, options: ErrorOptions = {}): ApiError {
  const spec: ErrorSpec = ERROR_CATALOGUE[code];
  const { detail = spec.detail, status = spec.status, pointer, parameter, header } = options;
  const error: ApiError = { status: String(status), code, title: spec.title, detail };
  if (pointer !== undefined) error.source = { pointer };
  else if (parameter !== undefined) error.source = { parameter };
  else if (header !== undefined) error.source = { header };
  return error;
}

/**
 * A rule of the service was broken. Carries every error to report (validation reports all
 * of them; state rules stop at the first) and the HTTP status they share.
 */
export class DomainError extends Error {
  override readonly name = 'DomainError';
  /** Seconds after which a retry may succeed (429, 503). */
  retryAfter?: number;
  /** A top-level `meta` beside `errors`, where the contract gives one (410 cursor_expired, 403 insufficient_scope). */
  meta?: Record<string, unknown>;
  /** Response headers the refusal carries besides Retry-After (WWW-Authenticate on a 403). */
  headers?: Record<string, string>;
  /**
   * The request (or a batch's operation) was refused before anything of it ran: its input did
   * not parse. Its outcome is not kept under an Idempotency-Key (API-CONTRACT.md §11).
   */
  beforeRun = false;
  readonly status: number;
  constructor(readonly errors: ApiError[]) {
    super(errors[0]?.detail ?? 'Request failed');
    this.status = Number(errors[0]?.status ?? 500);
  }

  get code(): ErrorCode {
    return this.errors[0]?.code ?? 'internal_error';
  }

  static of(code: ErrorCode, options: ErrorOptions = {}): DomainError {
    return new DomainError([apiError(code, options)]);
  }

  /** A 422 on one field of the request body. */
  static validation(code: ErrorCode, pointer: string, detail?: string): DomainError {
    return DomainError.of(code, { status: 422, pointer, detail });
  }

  static notFound(resource: 'project' | 'task' | 'user' | 'webhook' | 'token'): DomainError {
    return DomainError.of('record_not_found', {
      detail: `No ${resource} with this id exists for the current user.`,
      pointer: `/${resource}`,
    });
  }

  static unauthorized(detail?: string): DomainError {
    return DomainError.of('unauthorized', { detail });
  }

  withRetryAfter(seconds: number): this {
    this.retryAfter = seconds;
    return this;
  }

  refusedBeforeRun(): this {
    this.beforeRun = true;
    return this;
  }

  withHeader(name: string, value: string): this {
    this.headers = { ...this.headers, [name]: value };
    return this;
  }

  withMeta(meta: Record<string, unknown>): this {
    this.meta = meta;
    return this;
  }
}

/** Collects validation errors so that all of them are reported together. */
export class ValidationErrors {
  readonly errors: ApiError[] = [];
  add(code: ErrorCode, pointer: string, detail?: string): void {
    this.errors.push(apiError(code, { status: 422, pointer, detail }));
  }
  /** Runs a check that may throw a DomainError, keeping its errors instead. */
  collect(check: () => void): void {
    try {
      check();
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      this.errors.push(...error.errors);
    }
  }
  throwIfAny(): void {
    if (this.errors.length > 0) throw new DomainError(this.errors);
  }
}

/** Change-log event ids: per-user numbers written as decimal strings; "0" stands before the first. */
export const EVENT_ID = /^(0|[1-9][0-9]{0,17})$/;

/** The members that wrap a request body's fields (`{"project": {...}}`): refused as parameter_missing when not an object. */
export const BODY_WRAPPERS = ['project', 'task', 'user', 'webhook', 'replay', 'token'] as const;

/** Marker message for a required attribute whose absence is `must_be_set`, not `parameter_missing`. */
export const MUST_BE_SET = ERROR_CATALOGUE.must_be_set.detail;

export interface ZodConversionOptions {
  /** Raw input the schema saw; tells a missing member from one of the wrong type. */
  rawInput: unknown;
  /** Resource whose path id this procedure takes (`id` issues become 404 record_not_found). */
  resource?: 'project' | 'task' | 'webhook' | 'token';
  /** Members that come from the query string (issues become 400 with `source.parameter`). */
  queryParameters?: readonly string[];
  /** The error of a bad query parameter (src/core/list-query.ts `invalidQueryParameter`). */
  invalidQueryParameter?: (name: string) => ApiError;
  /** Top-level body wrappers (`project`, `task`, `user`, `webhook`, `replay`). */
  wrappers?: readonly string[];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): { present: boolean; value: unknown } {
  let current: unknown = root;
  for (const key of path) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) {
      return { present: false, value: undefined };
    }
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return { present: current !== undefined, value: current };
}

/** A JSON Pointer (RFC 6901) to a member of the request body. */
export function pointerOf(path: readonly PropertyKey[]): string {
  return '/' + path.map((p) => String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('/');
}

const invalidParameter = (name: string): ApiError => apiError('invalid', { status: 400, detail: `Query parameter ${name} is not valid.`, parameter: name });

/** Turns a failed input parse into the errors of API-CONTRACT.md §2. */
export function fromZodError(error: ZodError, options: ZodConversionOptions): DomainError {
  const { rawInput, resource, queryParameters = [], invalidQueryParameter = invalidParameter, wrappers = BODY_WRAPPERS } = options;
  const issues = error.issues;

  if (resource && issues.some((i) => i.path.length === 1 && i.path[0] === 'id')) {
    return DomainError.notFound(resource);
  }
  const query = issues.filter((i) => typeof i.path[0] === 'string' && queryParameters.includes(i.path[0]));
  if (query.length > 0) {
    // One error per parameter, every bad parameter of the request, in the order of the query's schema.
    const names = queryParameters.filter((name) => query.some((i) => i.path[0] === name));
    return new DomainError(names.map((name) => invalidQueryParameter(name)));
  }

  const seen = new Set<string>();
  const errors: ApiError[] = [];
  for (const issue of issues) {
    const pointer = pointerOf(issue.path);
    let code: ErrorCode;
    let detail = issue.message;
    const params = (issue as { params?: { code?: ErrorCode } }).params;
    if (issue.code === 'custom' && params?.code) {
      code = params.code;
    } else if (issue.message === MUST_BE_SET) {
      code = 'must_be_set';
    } else if (issue.code === 'invalid_type') {
      const isWrapper = issue.path.length === 1 && wrappers.includes(String(issue.path[0]));
      const { present } = valueAt(rawInput, issue.path);
      if (isWrapper) {
        code = 'parameter_missing';
        detail = `The request body needs a "${String(issue.path[0])}" object.`;
      } else if (!present) {
        code = 'parameter_missing';
        detail = 'This attribute is required.';
      } else {
        code = 'invalid';
        detail = `Expected ${issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`}.`;
      }
    } else {
      code = 'invalid';
    }
    const key = `${code} ${pointer}`;
    if (seen.has(key)) continue;
    seen.add(key);
    errors.push(apiError(code, { status: 422, detail, pointer }));
  }
  return new DomainError(errors);
}
