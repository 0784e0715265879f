/**
 * The one catalogue of errors (API-CONTRACT.md §2) and the one place that turns
 * domain errors, zod issues and transport failures into the error envelope.
 */
import type { ZodError } from 'zod';

export type ErrorCode =
  | 'parameter_missing'
  | 'invalid'
  | 'too_long'
  | 'too_short'
  | 'taken'
  | 'must_be_set'
  | 'cannot_be_set'
  | 'cannot_be_before_started_at'
  | 'cannot_be_after_today'
  | 'reached_max_started'
  | 'invalid_transition'
  | 'record_not_found'
  | 'unauthorized'
  | 'login_failed'
  | 'missing_endpoint'
  | 'unsupported_media_type'
  | 'invalid_json'
  | 'payload_too_large'
  | 'batch_too_large'
  | 'headers_too_large'
  | 'malformed_request'
  | 'rate_limited'
  | 'internal_error'
  | 'service_unavailable';

const TITLES: Record<ErrorCode, string> = {
  parameter_missing: 'Resource validation failed',
  invalid: 'Resource validation failed',
  too_long: 'Resource validation failed',
  too_short: 'Resource validation failed',
  taken: 'Resource validation failed',
  must_be_set: 'State change refused',
  cannot_be_set: 'State change refused',
  cannot_be_before_started_at: 'State change refused',
  cannot_be_after_today: 'State change refused',
  reached_max_started: 'State change refused',
  invalid_transition: 'State change refused',
  record_not_found: 'Record not found',
  unauthorized: 'Unauthorized',
  login_failed: 'Login failed',
  missing_endpoint: 'Endpoint not found',
  unsupported_media_type: 'Unsupported media type',
  invalid_json: 'Invalid JSON',
  payload_too_large: 'Payload too large',
  batch_too_large: 'Batch too large',
  headers_too_large: 'Request headers too large',
  malformed_request: 'Malformed request',
  rate_limited: 'Too many requests',
  internal_error: 'Internal server error',
  service_unavailable: 'Service unavailable',
};

export interface ErrorSource {
  pointer?: string;
  parameter?: string;
}

/** One member of the `errors` array, exactly as it goes on the wire. */
export interface ApiError {
  status: string;
  code: ErrorCode;
  title: string;
  detail: string;
  source?: ErrorSource;
}

export interface ErrorEnvelope {
  errors: ApiError[];
}

export function apiError(status: number, code: ErrorCode, detail: string, source?: ErrorSource): ApiError {
  const error: ApiError = { status: String(status), code, title: TITLES[code], detail };
  if (source) error.source = source;
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
  constructor(
    readonly status: number,
    readonly errors: ApiError[],
  ) {
    super(errors[0]?.detail ?? 'Request failed');
  }

  get code(): ErrorCode {
    return this.errors[0]?.code ?? 'internal_error';
  }

  /** A 422 on one field of the request body. */
  static validation(code: ErrorCode, pointer: string, detail: string): DomainError {
    return new DomainError(422, [apiError(422, code, detail, { pointer })]);
  }

  static notFound(resource: 'project' | 'task' | 'user'): DomainError {
    return new DomainError(404, [
      apiError(404, 'record_not_found', `No ${resource} with this id exists for the current user.`, {
        pointer: `/${resource}`,
      }),
    ]);
  }

  static unauthorized(detail = 'A valid access token is required in the Authorization header.'): DomainError {
    return new DomainError(401, [apiError(401, 'unauthorized', detail)]);
  }

  static of(status: number, code: ErrorCode, detail: string, source?: ErrorSource): DomainError {
    return new DomainError(status, [apiError(status, code, detail, source)]);
  }
}

/** Collects validation errors so that all of them are reported together. */
export class ValidationErrors {
  readonly errors: ApiError[] = [];
  add(code: ErrorCode, pointer: string, detail: string): void {
    this.errors.push(apiError(422, code, detail, { pointer }));
  }
  throwIfAny(): void {
    if (this.errors.length > 0) throw new DomainError(422, this.errors);
  }
}

/** Marker message for a required attribute whose absence is `must_be_set`, not `parameter_missing`. */
export const MUST_BE_SET = 'This attribute must be set.';

export interface ZodConversionOptions {
  /** Raw input the schema saw; tells a missing member from one of the wrong type. */
  rawInput: unknown;
  /** Resource whose path id this procedure takes (`id` issues become 404 record_not_found). */
  resource?: 'project' | 'task';
  /** Members that come from the query string (issues become 400 with `source.parameter`). */
  queryParameters?: readonly string[];
  /** Top-level body wrappers (`project`, `task`, `user`). */
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

/** Turns a failed input parse into the errors of API-CONTRACT.md §2. */
export function fromZodError(error: ZodError, options: ZodConversionOptions): DomainError {
  const { rawInput, resource, queryParameters = [], wrappers = ['project', 'task', 'user'] } = options;
  const issues = error.issues;

  if (resource && issues.some((i) => i.path.length === 1 && i.path[0] === 'id')) {
    return DomainError.notFound(resource);
  }
  const query = issues.filter((i) => typeof i.path[0] === 'string' && queryParameters.includes(i.path[0]));
  if (query.length > 0) {
    return new DomainError(
      400,
      query.map((i) =>
        apiError(400, 'invalid', `Query parameter ${String(i.path[0])} must be an integer >= 1.`, {
          parameter: String(i.path[0]),
        }),
      ),
    );
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
    errors.push(apiError(422, code, detail, { pointer }));
  }
  return new DomainError(422, errors);
}
