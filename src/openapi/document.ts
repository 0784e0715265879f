/**
 * openapi.json, generated from the router by trpc-to-openapi and then corrected where the
 * library cannot know the service: success statuses (201, 204), the error envelope of
 * API-CONTRACT.md §2 in place of the library's error bodies (with the codes each status can
 * carry, in `x-error-codes` and as one example per code), response headers, parameter
 * descriptions, tag descriptions, and request/response examples for every operation.
 */
import { z } from 'zod';
import { generateOpenApiDocument, type OpenApiMeta } from 'trpc-to-openapi';
import { DomainError, ERROR_CODES, apiError, type ApiError, type ErrorCode } from '../core/errors.js';
import { QUERY_PARAMETERS, invalidQueryParameter } from '../core/list-query.js';
import type { AppMeta } from '../core/context.js';
import { SCOPES, insufficientScope, type Access, type Scope } from '../core/scopes.js';
import { BODY_LIMIT_BYTES, MAX_BATCH_CALLS, MAX_JSON_DEPTH } from '../core/limits.js';
import { appRouter } from '../app/router.js';
import { conditionalHeader } from '../batch/batch.schema.js';
import { describeBatchOperations } from './batch-operations.js';
import { MAX_STARTED_PROJECTS } from '../projects/project.lifecycle.js';
import { MAX_WEBHOOKS_PER_USER } from '../webhooks/webhook.schema.js';
import { NDJSON } from '../users/export-account.js';

export const API_VERSION = '1.0.0';

const ApiErrorSchema = z
  .object({
    status: z.string().regex(/^[1-5][0-9]{2}$/).meta({ description: 'HTTP status, as a string.', example: '422' }),
    code: z.enum(ERROR_CODES).meta({ description: 'Stable snake_case code.', example: 'taken' }),
    title: z.string().meta({ example: 'Resource validation failed' }),
    detail: z.string().meta({ example: 'Project name already exists for this user.' }),
    source: z
      .object({
        pointer: z.string().optional().meta({ description: 'JSON Pointer into the request body.', example: '/project/name' }),
        parameter: z.string().optional().meta({ description: 'Query parameter at fault; on a request of one resource, also its header Idempotency-Key or If-Match.', example: 'page' }),
        header: z.string().optional().meta({ description: 'Request header at fault, where a parameter does not name it (If-Match on a batch).', example: 'If-Match' }),
      })
      .optional(),
  })
  .strict();

export const ErrorEnvelopeSchema = z.object({ errors: z.array(ApiErrorSchema).min(1) }).strict();
/** API-CONTRACT.md §10: a 410 cursor_expired also gives the id to restart from. */
export const CursorExpiredSchema = z
  .object({ errors: z.array(ApiErrorSchema).min(1), meta: z.object({ last_event_id: z.string() }).strict() })
  .strict();
/** API-CONTRACT.md §16: a 403 insufficient_scope also names the scope in `meta`. */
export const InsufficientScopeSchema = z
  .object({ errors: z.array(ApiErrorSchema).min(1), meta: z.object({ required_scope: z.enum(SCOPES) }).strict() })
  .strict();

type Json = Record<string, unknown>;

interface ErrorResponseSpec {
  status: number;
  codes: ErrorCode[];
  /** Said after the codes in the response's description. */
  note?: string;
}

/** Operations without a request body still read one that is sent, and ignore it once valid. */
const BODY_NOT_TAKEN = `only when a body is sent: this operation takes none, and ignores a JSON body of at most ${BODY_LIMIT_BYTES / 1024} KiB`;

/** Which of API-CONTRACT.md §11's headers an operation takes and answers with. */
interface Conditional {
  /** A write of projects, tasks or webhooks, a batch, or one marked `keyed`: Idempotency-Key (409, 422 idempotency_key_reused, Idempotent-Replayed). */
  keyed: boolean;
  /** A write of one project or task: If-Match and If-None-Match (412). */
  ifMatch: boolean;
  /** A read of projects or tasks: If-None-Match (304). */
  read: boolean;
  /** Its success carries the ETag of what it answers with. */
  etag: boolean;
}

function conditionalOf(meta: AppMeta): Conditional {
  const openapi = meta.openapi!;
  const ofResources = (openapi.tags ?? []).some((t) => t === 'projects' || t === 'tasks');
  // A batch of writes takes an Idempotency-Key for the whole; its operations carry their own If-Match.
  const batch = (openapi.tags ?? []).includes('batch');
  // A webhook's writes take a key too (src/writes/user-write.ts plainWrite); webhooks have no versions.
  const webhooks = (openapi.tags ?? []).includes('webhooks');
  const keyed = (ofResources || batch || webhooks || meta.keyed === true) && openapi.method !== 'GET';
  const read = ofResources && openapi.method === 'GET';
  // A reorder answers with several tasks' orders, a delete with nothing, a batch with several
  // answers: no one resource's tag.
  const etag = read || (keyed && ofResources && meta.successStatus !== 204 && !openapi.path.endsWith('/order'));
  return { keyed, ifMatch: keyed && ofResources && meta.resource !== undefined, read, etag };
}

/**
 * The error statuses an operation can answer with, and the codes of each. `missing_endpoint`
 * belongs to no operation: it answers only paths and methods that are not documented.
 */
function errorResponses(meta: AppMeta, hasBody: boolean, docs: OperationDocs): ErrorResponseSpec[] {
  const domain = meta.errorCodes ?? [];
  const conditional = conditionalOf(meta);
  const specs: ErrorResponseSpec[] = [];
  const requestCodes = domain.filter((c) => c !== 'login_failed' && c !== 'record_not_found' && c !== 'cursor_expired' && c !== 'precondition_failed' && c !== 'insufficient_scope');
  const bodyNote = hasBody ? undefined : BODY_NOT_TAKEN;
  specs.push({ status: 400, codes: ['invalid_json'], note: bodyNote && `\`invalid_json\` ${bodyNote}` });
  if (meta.queryParameters?.length) specs.push({ status: 400, codes: ['invalid'] });
  const batch = (meta.openapi?.tags ?? []).includes('batch');
  if (batch) specs.push({ status: 400, codes: ['invalid'], note: '`invalid`: an If-Match or If-None-Match header, named by `source.header`; each operation gives its own `if_match`' });
  if (meta.access !== 'public') specs.push({ status: 401, codes: ['unauthorized'] });
  // A scope of its own (a batch: those of its operations; a minting personal token: those it would give).
  if ((meta.access !== 'public' && meta.access !== 'token') || batch || domain.includes('insufficient_scope')) {
    specs.push({ status: 403, codes: ['insufficient_scope'] });
  }
  if (domain.includes('login_failed')) specs.push({ status: 401, codes: ['login_failed'] });
  // A batch answers with the status of the operation that failed: 404 for an unknown id, 412 for its stale if_match.
  if (meta.resource || batch) specs.push({ status: 404, codes: ['record_not_found'] });
  if (domain.includes('cursor_expired')) {
    specs.push({
      status: 410,
      codes: ['cursor_expired'],
      note: docs.gone?.note ?? 'a cursor older than what is kept, or beyond the newest id: a fresh account, another account’s cursor (503 instead while the database takes no writes: its log may be behind, resume later)',
    });
  }
  specs.push({ status: 413, codes: ['payload_too_large'], note: bodyNote }, { status: 415, codes: ['unsupported_media_type'], note: bodyNote });
  if (conditional.keyed) specs.push({ status: 409, codes: ['request_in_progress'] });
  if (conditional.ifMatch || domain.includes('precondition_failed')) specs.push({ status: 412, codes: ['precondition_failed'] });
  const unprocessable = [
    ...requestCodes,
    ...(domain.includes('record_not_found') ? ['record_not_found' as const] : []),
    ...(conditional.keyed ? (['invalid', 'idempotency_key_reused'] as const) : []),
  ];
  if (unprocessable.length) specs.push({ status: 422, codes: [...new Set(unprocessable)] });
  specs.push({ status: 429, codes: ['rate_limited'] }, { status: 500, codes: ['internal_error'] }, { status: 503, codes: ['unavailable'] });
  // Merge entries of one status (400 may come from the body and the query).
  const merged = new Map<number, ErrorResponseSpec>();
  for (const s of specs) {
    const before = merged.get(s.status);
    const note = before?.note && s.note ? `${before.note}; ${s.note}` : (before?.note ?? s.note);
    merged.set(s.status, { status: s.status, codes: [...new Set([...(before?.codes ?? []), ...s.codes])], note });
  }
  return [...merged.values()];
}

const SUCCESS_TEXT: Record<number, string> = {
  201: 'Created',
  // Webhooks: the delivery it asks for happens after the answer (API-CONTRACT.md §14).
  202: 'Accepted: delivery follows, in the background; its attempts show in the deliveries',
};

const STATUS_TEXT: Record<number, string> = {
  409: 'Conflict', 412: 'Precondition failed',
  400: 'Bad request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not found', 413: 'Payload too large',
  410: 'Gone', 415: 'Unsupported media type', 422: 'Validation failed', 429: 'Too many requests',
  500: 'Internal server error', 503: 'Service unavailable',
};

// ---------------------------------------------------------------------------------------
// Examples. Illustrative values, valid against the schemas they accompany (test/rules/contract.test.ts
// checks that); the times are whole Unix seconds around 2026-06-15T12:00:00Z.

const NOW = 1_781_524_800;
const DAY = 86_400;
const ORIGIN = 'http://localhost:3000';
const TOKEN = 'mF3yq0c5JkR8vT2wXbN6pL1sD9gH4aZeUoIiYr7tQxE';
const STABILITY = { stability: 'unstable', notice: 'This output may change soon.' } as const;

const user = { type: 'user', id: 1, attributes: { username: 'alice', timeZone: 'Europe/Paris' } } as const;

function project(id: number, attributes: Partial<Record<string, unknown>>, taskIds: number[] = []) {
  return {
    type: 'project',
    id,
    attributes: {
      name: 'Coffee', slug: 'coffee', description: '', state: 'newed',
      startedAt: 0, dueAt: 0, pausedAt: 0, finishedAt: 0, isInProgress: false,
      ...attributes,
    },
    relationships: {
      user: { data: { type: 'user', id: 1 } },
      tasks: { data: taskIds.map((t) => ({ type: 'task', id: t })) },
    },
  };
}

function task(id: number, attributes: Partial<Record<string, unknown>>, projectId: number | null = 1) {
  return {
    type: 'task',
    id,
    attributes: {
      label: 'Buy beans', order: id, plannedCount: 0, state: 'started',
      startedAt: NOW, plannedAt: 0, finishedAt: 0, abandonedAt: 0,
      ...attributes,
    },
    relationships: {
      user: { data: { type: 'user', id: 1 } },
      project: { data: projectId === null ? null : { type: 'project', id: projectId } },
    },
  };
}

const HOOK_URL = 'https://hooks.example.com/planning';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw2W3k1Tc9Z2Y=';

function token(attributes: Partial<Record<string, unknown>>, id = 7) {
  return {
    type: 'token', id,
    attributes: {
      name: 'Calendar sync', kind: 'personal', scopes: ['tasks:read'], createdAt: NOW, expiresAt: NOW + 180 * DAY, lastUsedAt: 0, current: false,
      ...attributes,
    },
  };
}
const sessionToken = token({ name: null, kind: 'session', scopes: [...SCOPES], expiresAt: NOW + 30 * DAY, lastUsedAt: NOW + 3600, current: true }, 3);

function webhook(attributes: Partial<Record<string, unknown>>, id = 1) {
  return {
    type: 'webhook',
    id,
    attributes: {
      url: HOOK_URL, events: ['task.*'], description: 'Team board', state: 'enabled', disabledReason: null,
      createdAt: NOW - DAY, lastEventId: '1042',
      ...attributes,
    },
  };
}

function delivery(id: number, attributes: Record<string, unknown>) {
  return { type: 'delivery', id, attributes: { eventId: '1042', eventType: 'task.updated', ...attributes } };
}

const startedProject = project(1, { state: 'started', startedAt: NOW, dueAt: NOW + 30 * DAY, isInProgress: true }, [1, 2]);

interface Example {
  summary: string;
  value: unknown;
}

interface OperationDocs {
  /** Used when the procedure's meta has none. */
  description?: string;
  /** Request body examples, by name; the first one pre-fills "Try it out". */
  request?: Record<string, Example>;
  /** Success body example (none for 204). */
  response?: unknown;
  /** One 422 example per documented code: [code, pointer, detail]. */
  unprocessable?: Array<[ErrorCode, string, string]>;
  /** Its 410 `cursor_expired`, when not a cursor of the change log: when it is answered, and its example. */
  gone?: { note: string; pointer?: string; detail: string };
}

const OPERATION_DOCS: Record<string, OperationDocs> = {
  'users-register': {
    request: { register: { summary: 'A new user', value: { user: { username: 'alice', password: 'correct horse battery staple', time_zone: 'Europe/Paris' } } } },
    response: { data: user, meta: { token: TOKEN } },
    unprocessable: [
      ['parameter_missing', '/user', 'The request body needs a "user" object.'],
      ['invalid', '/user/username', 'Username may contain only a-z, 0-9, underscores and hyphens.'],
      ['too_long', '/user/username', 'Username is too long (at most 50 characters).'],
      ['too_short', '/user/password', 'Password is too short (at least 8 characters).'],
      ['taken', '/user/username', 'This username is already taken.'],
    ],
  },
  'users-authorize': {
    request: { login: { summary: 'Username and password', value: { username: 'alice', password: 'correct horse battery staple' } } },
    response: { data: user, meta: { token: TOKEN } },
    unprocessable: [
      ['parameter_missing', '/password', 'This attribute is required.'],
      ['invalid', '/username', 'Expected a string.'],
      ['too_long', '/password', 'Password is too long (at most 1000 characters).'],
    ],
  },
  'users-me': {
    description: 'Returns the user the access token belongs to, with the time zone of its "today".',
    response: { data: user },
  },
  'users-update': {
    request: { zone: { summary: 'Live in Paris', value: { user: { time_zone: 'Europe/Paris' } } } },
    response: { data: user },
    unprocessable: [
      ['parameter_missing', '/user', 'The request body needs a "user" object.'],
      ['invalid', '/user/time_zone', 'time_zone must be an IANA time zone name, such as Europe/Paris or UTC.'],
    ],
  },
  'users-changePassword': {
    request: { change: { summary: 'The current password and a new one', value: { user: { current_password: 'correct horse battery staple', password: 'battery staple horse correct' } } } },
    unprocessable: [
      ['parameter_missing', '/user', 'The request body needs a "user" object.'],
      ['invalid', '/user/current_password', 'The password is wrong.'],
      ['too_short', '/user/password', 'Password is too short (at least 8 characters).'],
      ['too_long', '/user/password', 'Password is too long (at most 200 characters).'],
    ],
  },
  'users-delete': {
    request: { delete: { summary: 'The password, once more', value: { user: { password: 'correct horse battery staple' } } } },
    unprocessable: [
      ['parameter_missing', '/user/password', 'This attribute is required.'],
      ['invalid', '/user/password', 'The password is wrong.'],
      ['too_long', '/user/password', 'Password is too long (at most 1000 characters).'],
    ],
  },
  'users-revoke': {},
  'users-export': {
    response: {
      user,
      projects: [project(1, { state: 'started', startedAt: NOW - 10 * DAY, isInProgress: true }, [1])],
      tasks: [
        task(1, {}),
        task(2, { label: 'Old errand', order: 2, state: 'finished', plannedCount: 1, startedAt: NOW - 400 * DAY, plannedAt: NOW - 399 * DAY, finishedAt: NOW - 398 * DAY }, null),
        task(3, { label: 'Dropped idea', order: 3, state: 'abandoned', startedAt: 0, abandonedAt: NOW - 30 * DAY }),
      ],
      webhooks: [webhook({})],
    },
  },
  'projects-create': {
    request: { create: { summary: 'A project name', value: { project: { name: 'Coffee' } } } },
    response: { data: project(1, {}), meta: STABILITY },
    unprocessable: [
      ['parameter_missing', '/project/name', 'This attribute is required.'],
      ['invalid', '/project/name', 'Project name may contain only letters, digits, underscores and hyphens.'],
      ['too_long', '/project/name', 'Project name is too long (at most 100 characters).'],
      ['taken', '/project/name', 'Project name already exists for this user.'],
    ],
  },
  'projects-list': {
    response: {
      data: [startedProject, project(2, { name: 'Garden', slug: 'garden' })],
      links: {
        first: `${ORIGIN}/api/users/me/projects?page=1`,
        last: `${ORIGIN}/api/users/me/projects?page=2`,
        next: `${ORIGIN}/api/users/me/projects?page=2`,
      },
      meta: STABILITY,
    },
  },
  'projects-get': {
    description: "One of the current user's projects, with its non-abandoned tasks by order. An id that is unknown, malformed or another user's is 404 `record_not_found`.",
    response: { data: startedProject, meta: STABILITY },
  },
  'projects-update': {
    request: {
      rename: { summary: 'Rename and describe', value: { project: { name: 'Coffee-roasting', description: 'Beans, heat and patience.' } } },
      due: { summary: 'Move the due date (started projects only)', value: { project: { due_at: NOW + 45 * DAY } } },
    },
    response: {
      data: project(1, { name: 'Coffee-roasting', slug: 'coffee-roasting', description: 'Beans, heat and patience.' }),
      meta: STABILITY,
    },
    unprocessable: [
      ['parameter_missing', '/project', 'The request body needs a "project" object.'],
      ['invalid', '/project/name', 'Project name may contain only letters, digits, underscores and hyphens.'],
      ['too_long', '/project/description', 'Description is too long (at most 10000 characters).'],
      ['taken', '/project/name', 'Project name already exists for this user.'],
      ['cannot_be_set', '/project/due_at', 'due_at can only be changed while the project is started.'],
      ['cannot_be_before_started_at', '/project/due_at', 'due_at cannot be before the project started.'],
    ],
  },
  'projects-changeState': {
    request: {
      start: { summary: 'Start (due_at required, after today)', value: { project: { state: 'started', due_at: NOW + 30 * DAY } } },
      pause: { summary: 'Pause', value: { project: { state: 'paused' } } },
      restart: { summary: 'Restart (due_at optional)', value: { project: { state: 'started' } } },
      finish: { summary: 'Finish (finished_at optional)', value: { project: { state: 'finished', finished_at: NOW } } },
    },
    response: { data: startedProject, meta: STABILITY },
    unprocessable: [
      ['parameter_missing', '/project', 'The request body needs a "project" object.'],
      ['invalid', '/project/state', 'Expected a string.'],
      ['must_be_set', '/project/due_at', 'due_at must be set on start.'],
      ['cannot_be_set', '/project/finished_at', 'finished_at cannot be set on start.'],
      ['invalid_transition', '/project/state', 'A newed project cannot become paused.'],
      ['cannot_be_before_started_at', '/project/due_at', 'due_at must be after today.'],
      ['cannot_be_after_today', '/project/finished_at', 'finished_at cannot be after today.'],
      ['reached_max_started', '/project/state', `At most ${MAX_STARTED_PROJECTS} projects can be started at the same time.`],
    ],
  },
  'projects-delete': {},
  'tasks-create': {
    request: {
      inProject: { summary: 'In a project', value: { task: { label: 'Buy beans', project_id: 1 } } },
      planned: { summary: 'Planned', value: { task: { label: 'Descale the machine', planned_at: NOW + 2 * DAY } } },
    },
    response: { data: task(1, {}), meta: STABILITY },
    unprocessable: [
      ['parameter_missing', '/task/label', 'This attribute is required.'],
      ['invalid', '/task/planned_at', 'Expected an integer.'],
      ['too_long', '/task/label', 'Label is too long (at most 1000 characters).'],
      ['record_not_found', '/task/project_id', 'No project with this id exists for the current user.'],
    ],
  },
  'tasks-list': {
    response: {
      data: [task(1, {}), task(2, { label: 'Grind', state: 'planned', plannedAt: NOW + DAY, plannedCount: 1 }, null)],
      links: { first: `${ORIGIN}/api/users/me/tasks?page=1`, last: `${ORIGIN}/api/users/me/tasks?page=1` },
      meta: STABILITY,
    },
  },
  'tasks-get': {
    description: "One of the current user's tasks, abandoned ones included. An id that is unknown, malformed or another user's is 404 `record_not_found`.",
    response: { data: task(1, {}), meta: STABILITY },
  },
  'tasks-update': {
    request: {
      relabel: { summary: 'New label', value: { task: { label: 'Buy green beans' } } },
      detach: { summary: 'Leave its project', value: { task: { project_id: null } } },
    },
    response: { data: task(1, { label: 'Buy green beans' }), meta: STABILITY },
    unprocessable: [
      ['parameter_missing', '/task', 'The request body needs a "task" object.'],
      ['invalid', '/task/label', 'Label must not be empty.'],
      ['too_long', '/task/label', 'Label is too long (at most 1000 characters).'],
      ['record_not_found', '/task/project_id', 'No project with this id exists for the current user.'],
    ],
  },
  'tasks-changeState': {
    request: {
      plan: { summary: 'Plan', value: { task: { state: 'planned' } } },
      finish: { summary: 'Finish', value: { task: { state: 'finished' } } },
      abandon: { summary: 'Abandon', value: { task: { state: 'abandoned' } } },
    },
    response: { data: task(1, { state: 'planned', plannedAt: NOW, plannedCount: 1 }), meta: STABILITY },
    unprocessable: [
      ['parameter_missing', '/task', 'The request body needs a "task" object.'],
      ['invalid', '/task/state', 'Expected a string.'],
      ['must_be_set', '/task/state', 'This attribute must be set.'],
      ['cannot_be_set', '/task/planned_at', 'planned_at cannot be set when changing the state.'],
      ['invalid_transition', '/task/state', 'A newed task cannot become finished.'],
    ],
  },
  'events-list': {
    response: {
      data: [
        { id: '1041', type: 'project.updated', data: project(1, { state: 'started', startedAt: NOW, dueAt: NOW + 7 * DAY, isInProgress: true }, [7]), at: NOW },
        { id: '1042', type: 'task.updated', data: task(7, { state: 'started', startedAt: NOW }), at: NOW },
      ],
      links: { next: `${ORIGIN}/api/users/me/events?after=1042` },
      meta: { last_event_id: '1042' },
    },
  },
  'events-ticket': {
    response: { data: { type: 'event_stream_ticket', attributes: { ticket: 'kV9pQ2x7Lm4RtY8wZc1NbH6dF3gJ0sAe', expiresAt: NOW + 60 } } },
  },
  'batch-apply': {
    request: {
      trip: {
        summary: 'A project with a task, and a swap of started projects',
        value: {
          operations: [
            { op: 'projects.create', ref: 'trip', input: { project: { name: 'Trip' } } },
            { op: 'tasks.create', input: { task: { label: 'Book train', project_id: { ref: 'trip' } } } },
            { op: 'projects.changeState', input: { id: 3, project: { state: 'paused' } }, if_match: '"p3-v7"' },
            { op: 'projects.changeState', input: { id: { ref: 'trip' }, project: { state: 'started', due_at: NOW + 7 * DAY } } },
          ],
        },
      },
    },
    response: {
      data: [
        { status: 201, body: { data: project(4, { name: 'Trip' }), meta: STABILITY } },
        { status: 201, body: { data: task(12, { label: 'Book train', state: 'newed', startedAt: 0 }, 4), meta: STABILITY } },
      ],
    },
    unprocessable: [
      ['parameter_missing', '/operations', 'This attribute is required.'],
      ['invalid', '/operations/1/task/project_id', 'No earlier operation of this batch has ref "trip".'],
      ['too_long', '/operations', 'A batch holds at most 100 operations.'],
      ['taken', '/operations/0/project/name', 'Project name already exists for this user.'],
      ['must_be_set', '/operations/3/project/due_at', 'due_at must be set on start.'],
      ['cannot_be_set', '/operations/2/project/due_at', 'due_at cannot be set on pause.'],
      ['invalid_transition', '/operations/2/project/state', 'A newed project cannot become paused.'],
      ['cannot_be_before_started_at', '/operations/3/project/due_at', 'due_at must be after today.'],
      ['cannot_be_after_today', '/operations/2/project/finished_at', 'finished_at cannot be after today.'],
      ['reached_max_started', '/operations/3/project/state', `At most ${MAX_STARTED_PROJECTS} projects can be started at the same time.`],
      ['record_not_found', '/operations/1/task/project_id', 'No project with this id exists for the current user.'],
    ],
  },
  'tasks-reorder': {
    request: { top: { summary: 'Move to the top', value: { task: { order: 1 } } } },
    response: {
      data: [
        { type: 'task', id: 3, attributes: { order: 1 } },
        { type: 'task', id: 1, attributes: { order: 2 } },
        { type: 'task', id: 2, attributes: { order: 3 } },
      ],
      meta: STABILITY,
    },
    unprocessable: [
      ['parameter_missing', '/task/order', 'This attribute is required.'],
      ['invalid', '/task/order', 'Expected an integer.'],
    ],
  },
  'tokens-create': {
    request: {
      readOnly: { summary: 'A read-only token for a calendar app', value: { token: { name: 'Calendar sync', scopes: ['tasks:read'], expires_at: NOW + 180 * DAY } } },
      script: { summary: 'A script that files tasks', value: { token: { name: 'Inbox script', scopes: ['tasks:write', 'projects:read'], expires_at: NOW + 30 * DAY } } },
    },
    response: { data: token({}), meta: { secret: 'plnr_AAAAAAAAAAFfV3mJk2aQ8pR1sT4uW7xZ0bC3eF6hI9kL2nO5qR8tU1' } },
    unprocessable: [
      ['parameter_missing', '/token/name', 'This attribute is required.'],
      ['invalid', '/token/expires_at', 'The expiry must be in the future and at most 366 days ahead.'],
      ['too_long', '/token/name', 'Name is too long (at most 100 characters).'],
      ['limit_reached', '/token', 'A user may have at most 50 live personal access tokens: revoke one first.'],
    ],
  },
  'tokens-list': {
    response: {
      data: [token({ lastUsedAt: NOW + 7200 }), sessionToken],
      links: { first: `${ORIGIN}/api/users/me/tokens?page=1`, last: `${ORIGIN}/api/users/me/tokens?page=1` },
    },
  },
  'tokens-current': { response: { data: sessionToken } },
  'tokens-get': { response: { data: token({ lastUsedAt: NOW + 7200 }) } },
  'webhooks-create': {
    request: {
      tasks: { summary: 'Task events to a URL of yours', value: { webhook: { url: HOOK_URL, events: ['task.*'], description: 'Team board' } } },
      everything: { summary: 'Every event (events defaults to ["*"])', value: { webhook: { url: 'https://hooks.example.com/everything' } } },
    },
    response: { data: webhook({}), meta: { secret: SECRET } },
    unprocessable: [
      ['parameter_missing', '/webhook/url', 'This attribute is required.'],
      ['invalid', '/webhook/url', "The URL's host resolves to 10.1.2.3, a private address; webhooks go to public addresses only."],
      ['too_long', '/webhook/description', 'Description is too long (at most 1000 characters).'],
      ['limit_reached', '/webhook', `You have ${MAX_WEBHOOKS_PER_USER} webhooks, the most a user may have: delete one first.`],
    ],
  },
  'webhooks-list': {
    response: { data: [webhook({}), webhook({ url: 'https://hooks.example.com/everything', events: ['*'], description: '', state: 'disabled', disabledReason: 'The URL answered 410 Gone.', lastEventId: '1000' }, 2)] },
  },
  'webhooks-get': {
    response: { data: webhook({}) },
  },
  'webhooks-update': {
    request: {
      disable: { summary: 'Stop delivering for now', value: { webhook: { state: 'disabled' } } },
      enable: { summary: 'Resume from the first event not delivered', value: { webhook: { state: 'enabled' } } },
      move: { summary: 'Another URL, every event', value: { webhook: { url: 'https://hooks.example.com/v2', events: ['*'], description: 'Team board, v2' } } },
    },
    response: { data: webhook({ state: 'disabled' }) },
    unprocessable: [
      ['parameter_missing', '/webhook', 'The request body needs a "webhook" object.'],
      ['invalid', '/webhook/url', 'The URL must start with https:.'],
      ['too_long', '/webhook/description', 'Description is too long (at most 1000 characters).'],
    ],
    gone: {
      note: 'enabling a disabled webhook whose first undelivered event is no longer kept: replay from a kept id, then enable',
      detail: 'The first event this webhook has not delivered (after 980) is no longer kept: replay it from a kept id (meta.last_event_id is the newest), then enable it.',
    },
  },
  'webhooks-deliveries': {
    response: {
      data: [
        delivery(31, { attempt: 2, at: NOW + 60, outcome: 'delivered', httpStatus: 204, error: null, durationMs: 84, nextAttemptAt: 0 }),
        delivery(30, { attempt: 1, at: NOW, outcome: 'failed', httpStatus: 503, error: 'HTTP 503', durationMs: 312, nextAttemptAt: NOW + 60 }),
      ],
      links: {
        first: `${ORIGIN}/api/webhooks/1/deliveries?page=1`,
        last: `${ORIGIN}/api/webhooks/1/deliveries?page=3`,
        next: `${ORIGIN}/api/webhooks/1/deliveries?page=2`,
      },
    },
  },
  'webhooks-replay': {
    request: { after: { summary: 'Every kept event after 1000, again', value: { replay: { after: '1000' } } } },
    response: { data: webhook({ lastEventId: '1000' }) },
    unprocessable: [
      ['parameter_missing', '/replay', 'The request body needs a "replay" object.'],
      ['invalid', '/replay/after', 'An event id: decimal digits.'],
    ],
    gone: {
      note: '`replay.after` older than what is kept, or beyond the newest id of your change log',
      pointer: '/replay/after',
      detail: 'Events after this id are no longer kept.',
    },
  },
  'webhooks-test': {
    response: { data: webhook({}) },
  },
  'webhooks-rotateSecret': {
    response: { data: webhook({}), meta: { secret: 'whsec_uulgK2tJWo/zgqQqK7B6ej4yrL3/zgiuszL3ZiR7sYg=' } },
  },
};

/** The scope a 403 example names: the operation's own, or (a batch, a token's making) one it may need. */
function scopeExample(meta: AppMeta): Scope {
  return meta.access && meta.access !== 'token' && meta.access !== 'public' ? meta.access : 'tasks:write';
}

/** Example errors of the statuses every operation shares, by code. */
function commonErrorExample(code: ErrorCode, meta: AppMeta, docs: OperationDocs): ApiError {
  if ((meta.openapi?.tags ?? []).includes('batch')) {
    // The operation that failed, under /operations/<index>.
    if (code === 'record_not_found') return { ...DomainError.notFound('project').errors[0]!, source: { pointer: '/operations/2/project' } };
    if (code === 'precondition_failed') return apiError(code, { pointer: '/operations/2/if_match' });
    if (code === 'invalid') return conditionalHeader((name) => (name === 'If-Match' ? '"p3-v7"' : undefined))!.errors[0]!;
  }
  switch (code) {
    case 'invalid': return invalidQueryParameter('page');
    case 'record_not_found': return DomainError.notFound(meta.resource ?? 'project').errors[0]!;
    case 'rate_limited': return apiError(code, { detail: 'Too many requests; retry in 42 seconds.' });
    case 'cursor_expired': return docs.gone ? apiError(code, { pointer: docs.gone.pointer, detail: docs.gone.detail }) : apiError(code);
    case 'request_in_progress': return apiError(code, { parameter: 'Idempotency-Key' });
    case 'precondition_failed': return apiError(code, { parameter: 'If-Match' });
    case 'insufficient_scope': return insufficientScope(scopeExample(meta)).errors[0]!;
    default: return apiError(code);
  }
}

function errorExamples(operationId: string, meta: AppMeta, status: number, codes: ErrorCode[]): Record<string, Example> {
  const examples: Record<string, Example> = {};
  const unprocessable = OPERATION_DOCS[operationId]?.unprocessable ?? [];
  for (const code of codes) {
    let error: ApiError;
    if (status === 422) {
      const known = unprocessable.find(([c]) => c === code);
      if (known) {
        error = apiError(code, { status: 422, detail: known[2], pointer: known[1] });
      } else if (code === 'idempotency_key_reused') {
        error = apiError(code, { parameter: 'Idempotency-Key', detail: 'This Idempotency-Key was already used with a different request (method, path or body).' });
      } else if (code === 'invalid') {
        error = apiError(code, { parameter: 'Idempotency-Key', detail: 'Idempotency-Key must be 1 to 255 visible ASCII characters.' });
      } else {
        continue;
      }
    } else {
      error = commonErrorExample(code, meta, OPERATION_DOCS[operationId] ?? {});
    }
    const value =
      code === 'cursor_expired' ? { errors: [error], meta: { last_event_id: '1042' } }
      : code === 'insufficient_scope' ? { errors: [error], meta: { required_scope: scopeExample(meta) } }
      : { errors: [error] };
    const on = error.source?.pointer ?? (error.source?.header === undefined ? undefined : `the header ${error.source.header}`);
    examples[code] = { summary: `${code}${on ? ` on ${on}` : ''}`, value };
  }
  if (operationId === 'projects-create' && status === 422) {
    examples['invalid+too_long'] = {
      summary: 'Every validation error of the request is reported',
      value: {
        errors: [
          apiError('invalid', { detail: 'Project name may contain only letters, digits, underscores and hyphens.', pointer: '/project/name' }),
          apiError('too_long', { detail: 'Project name is too long (at most 100 characters).', pointer: '/project/name' }),
        ],
      },
    };
  }
  return examples;
}

/** How a path id or a page is written in the URL. */
const INTEGER_TEXT = '^[1-9][0-9]*$';

const HEADERS = {
  'X-Request-Id': {
    description: 'Identifies the request in the server logs. A well-formed incoming `X-Request-Id` is echoed.',
    required: true,
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'The scope the token lacks (RFC 6750 §3.1): `Bearer error="insufficient_scope", scope="<scope>"`; also in the body\'s `meta.required_scope`.',
    required: true,
    schema: { type: 'string' },
    example: 'Bearer error="insufficient_scope", scope="tasks:write"',
  },
  'Retry-After': {
    description: 'Seconds to wait before retrying.',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  ETag: {
    description: 'Strong entity tag of what the response describes (one project or task, or this list page). Send it back in `If-Match` to change the resource only if it did not change since, or in `If-None-Match` to get 304 while it did not.',
    required: true,
    schema: { type: 'string', pattern: '^"[\\x21\\x23-\\x7e]*"$' },
  },
  'Idempotent-Replayed': {
    description: '`true` when this is the stored outcome of an earlier request with the same `Idempotency-Key`, sent again instead of running the request a second time.',
    schema: { type: 'string', enum: ['true'] },
  },
  'RateLimit-Policy': {
    description: 'The limit that applies, as `<requests>;w=<seconds>`. Sent on every answer the rate limiter counted (limits are on unless configured to 0).',
    schema: { type: 'string', pattern: '^[0-9]+;w=[0-9]+$' },
    example: '1200;w=60',
  },
  'RateLimit-Limit': { description: 'Requests allowed in the window. Sent with RateLimit-Policy.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Remaining': { description: 'Requests left in the window. Sent with RateLimit-Policy.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Reset': { description: 'Seconds until a request will be allowed again. Sent with RateLimit-Policy.', schema: { type: 'integer', minimum: 0 } },
};

/** Every operation is rate limited: per client address and username (register, log in), else per token. */
const RATE_LIMIT_HEADERS = ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const;
const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });

function responseHeaders(status: number, conditional?: Conditional): Json {
  const headers: Json = { 'X-Request-Id': headerRef('X-Request-Id') };
  for (const name of RATE_LIMIT_HEADERS) headers[name] = headerRef(name);
  if (status === 429 || status === 503) headers['Retry-After'] = headerRef('Retry-After');
  if (status === 403) headers['WWW-Authenticate'] = headerRef('WWW-Authenticate');
  if (conditional?.etag && (status < 300 || status === 304)) headers.ETag = headerRef('ETag');
  // Outcomes a retry with the same key can replay: successes and errors of the work that ran.
  if (conditional?.keyed && (status < 300 || status === 404 || status === 410 || status === 412 || status === 422)) headers['Idempotent-Replayed'] = headerRef('Idempotent-Replayed');
  return headers;
}

/** The same path with `Accept: text/event-stream` is a stream (src/http/event-stream.ts). */
function describeEventStream(operation: Json): void {
  (operation.parameters as Json[]).push(
    {
      name: 'Accept', in: 'header', required: false, schema: { type: 'string', enum: ['application/json', 'text/event-stream'] },
      description: '`text/event-stream` opens a Server-Sent Events stream of the change log instead of a page.',
    },
    {
      name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,17})$' },
      description: 'Stream only: resume after this event id (what EventSource sends when it reconnects); wins over `after`.',
    },
    {
      name: 'ticket', in: 'query', required: false, schema: { type: 'string', pattern: '^[A-Za-z0-9_\\-]{1,100}$' },
      description: 'Stream only: a ticket from POST /api/users/me/events/tickets, in place of the Authorization header (for EventSource).',
      example: 'Zx1c0Qm8R2vT5bLk9pW3yN7h',
    },
  );
  const ok = (operation.responses as Record<string, Json>)['200']!;
  (ok.content as Record<string, Json>)['text/event-stream'] = {
    schema: {
      type: 'string',
      description: 'Server-Sent Events: for each change `id: <event id>`, `event: <event type>`, `data: <the ChangeEvent as JSON>`; `: heartbeat` comments every 15 s; an `event: error` with an error envelope as data before the server ends a stream it cannot go on with (token revoked, database gone).',
    },
    example: 'retry: 2000\n\nid: 1042\nevent: task.updated\ndata: {"id":"1042","type":"task.updated","data":{"type":"task","id":7,...},"at":1781524800}\n\n: heartbeat\n\n',
  };
}

/** The export's other form, by `Accept`, and its attachment header (src/users/export-account.ts). */
function describeExport(operation: Json, example: unknown): void {
  operation.parameters ??= [];
  (operation.parameters as Json[]).push({
    name: 'Accept', in: 'header', required: false, schema: { type: 'string', enum: ['application/json', NDJSON] },
    description: `\`${NDJSON}\` answers the same items as NDJSON, one JSON object a line; anything else is the JSON document.`,
  });
  const ok = (operation.responses as Record<string, Json>)['200']!;
  ok.headers = {
    ...(ok.headers as Json),
    'Content-Disposition': {
      description: '`attachment; filename="export.json"` (`export.ndjson` for NDJSON).',
      required: true,
      schema: { type: 'string' },
    },
  };
  const { user: head, projects, tasks, webhooks } = example as Record<string, unknown[]> & { user: unknown };
  (ok.content as Record<string, Json>)[NDJSON] = {
    schema: {
      type: 'string',
      description: 'NDJSON: the user (as `user` in the JSON form), then each project, task and webhook (as in its arrays), one JSON object a line, each with its `type`.',
    },
    example: [head, ...projects!, ...tasks!, ...webhooks!].map((line) => JSON.stringify(line)).join('\n') + '\n',
  };
}

const TAGS = [
  { name: 'users', description: 'Registration, login (access tokens) and the current user. Registering and logging in need no token.' },
  { name: 'tokens', description: 'Your access tokens: personal access tokens limited to scopes, for scripts, apps and automations, and every live token listed, with when each was last used.' },
  { name: 'projects', description: `The current user's projects and their lifecycle: newed, started, paused, finished. At most ${MAX_STARTED_PROJECTS} started at once.` },
  { name: 'tasks', description: "The current user's tasks: their order, their lifecycle (newed, started, planned, finished, abandoned) and their project." },
  { name: 'batch', description: 'Several writes of projects and tasks in one request and one transaction: all of them, or none.' },
  { name: 'events', description: "The change log of the current user's projects and tasks: delta sync, a live Server-Sent Events stream, and tickets for browsers' EventSource." },
  { name: 'webhooks', description: `The change log pushed to URLs of yours: each event a signed POST (Standard Webhooks), in order, at least once; at most ${MAX_WEBHOOKS_PER_USER} webhooks per user, their delivery attempts, replays, test events and signing secrets.` },
];

const DESCRIPTION = [
  `Projects and tasks of the current user. Every operation is also a tRPC procedure at /trpc (superjson); a /trpc batch holds at most ${MAX_BATCH_CALLS} calls (more is 400 \`batch_too_large\` for each call), and methods other than GET and POST on /trpc, and a POST to a subscription, are 404 \`missing_endpoint\`.`,
  '',
  `- Bodies are JSON in UTF-8, sent with \`Content-Type: application/json\` (no charset, or \`charset=utf-8\`) and no \`Content-Encoding\`, at most ${BODY_LIMIT_BYTES / 1024} KiB: another media type, charset, parameter or coding is 415 (a request with no body needs none: a missing wrapper is then 422 \`parameter_missing\`), bytes that are not UTF-8 or not JSON are 400 \`invalid_json\`, a larger body 413. A body sent to an operation that takes none (GET, DELETE) is held to the same rules and then ignored.`,
  '- Without a valid token, an operation that needs one answers 401 before anything else is checked (path id, query, media type, body).',
  `- Arrays and objects may nest at most ${MAX_JSON_DEPTH} levels deep (\`{"task":{"order":1}}\` is 2): a deeper body is 400 \`invalid_json\`, on /trpc too (where the input is counted, not superjson's \`{"json": …}\` or a batch's \`{"0": …}\` around it).`,
  '- Timestamps are whole Unix seconds (UTC); an unset timestamp is 0.',
  '- Every project and task response carries `meta` with a notice that the output may change soon.',
  '- Errors are `{"errors": [{status, code, title, detail, source}]}`. Each response lists the codes the operation can answer with (also in `x-error-codes`); the refusals of the HTTP layer below (`malformed_request`, 417, 431, 501), which come before any operation is chosen, are listed here only.',
  '- A path or method that no operation answers is 404 `missing_endpoint` (the path is read with its dot segments resolved and `\\` as `/`); a request that is not valid HTTP, or an HTTP/1.1 request without one valid `Host`, is 400 `malformed_request`; oversized headers 431 `headers_too_large`; an `Expect` other than `100-continue` 417 `expectation_failed`; a `Transfer-Encoding` other than `chunked` 501 `not_implemented`.',
  '- Authenticate with `Authorization: <token>` from registration or login (`Bearer <token>` is accepted too).',
  '- Retries: every write of projects, tasks, webhooks and tokens, a batch, a stream ticket and a change of the user\'s settings or password takes an `Idempotency-Key` (1 to 255 visible ASCII characters), kept per user for 24 hours (the two that end the token in use, logging out and deleting the account, check its form but keep nothing under it: a retry of either is 401). A retry with the same key, method, path and body gets the first status and body again with `Idempotent-Replayed: true` and changes nothing; another request with the key is 422 `idempotency_key_reused`; while the first still runs, 409 `request_in_progress`. A request refused before it ran (400, 401, 413, 415, 422 validation, 429) keeps nothing.',
  '- Versions: single projects and tasks, and every list page, carry a strong `ETag`. `If-None-Match` with it answers 304 with no body while nothing changed; `If-Match` on a write of one project or task answers 412 `precondition_failed` and changes nothing when the resource changed since (`*` or no header: no condition), and `If-None-Match` there answers 412 when it names the current tag (or is `*`), never 304. On /trpc the same headers apply to calls sent one per request; a batch of several calls gets no `ETag` and is refused (400 `invalid`) when it carries any of them.',
].join('\n');

/** An operation's `security` (API-CONTRACT.md §16): `{"token": ["tasks:write"]}`, `{"token": []}` for any token, none for no token. */
function securityOf(access: Access | undefined): Json[] {
  if (access === undefined) throw new Error('An operation has no access in src/app/scopes.ts');
  if (access === 'public') return [];
  return [{ token: access === 'token' ? [] : [access] }];
}

export function buildOpenApiDocument(): Json {
  const doc = generateOpenApiDocument(appRouter, {
    title: 'Planning service',
    version: API_VERSION,
    description: DESCRIPTION,
    baseUrl: '/',
    tags: TAGS.map((t) => t.name),
    securitySchemes: {
      token: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description: 'An access token, as `Authorization: <token>` (`Bearer <token>` is accepted too): a session token from registration or login (every scope), or a personal access token (`plnr_…`) with the scopes it was made with. An operation lists the scope it needs; a token without it is 403 `insufficient_scope`.',
      },
    },
  }) as unknown as Json;
  doc.tags = TAGS;

  const paths = doc.paths as Record<string, Record<string, Json>>;
  const procedures = appRouter._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta } }>;
  for (const procedure of Object.values(procedures)) {
    const meta = procedure._def.meta;
    const openapi = (meta as OpenApiMeta | undefined)?.openapi;
    if (!meta || !openapi) continue;
    const operation = paths[openapi.path]?.[openapi.method.toLowerCase()];
    if (!operation) throw new Error(`No operation for ${openapi.method} ${openapi.path}`);
    const operationId = operation.operationId as string;
    const docs = OPERATION_DOCS[operationId] ?? {};
    if (!operation.description && docs.description) operation.description = docs.description;

    for (const parameter of (operation.parameters as Json[] | undefined) ?? []) {
      // Both are written as plain decimal digits: no sign, leading zero, exponent, fraction or
      // space ("01", "1e3", "+1", "0x1" are refused), which the pattern states for the text.
      if (parameter.in === 'path' && parameter.name === 'id' && meta.resource) {
        parameter.description = `Id of one of the current user's ${meta.resource}s, written as decimal digits with no sign, leading zero, exponent or space (its \`pattern\`). Unknown, malformed or foreign ids are 404 \`record_not_found\`.`;
        (parameter.schema as Json).pattern = INTEGER_TEXT;
        parameter.example = 1;
      }
      if (parameter.in === 'query' && parameter.name === 'after') {
        parameter.description = 'The last event id you have (`0` for the whole kept log). Not an event id: 400 `invalid`.';
        parameter.example = '1041';
      }
      // The parameters of a list (API-CONTRACT.md §12) say what their schema says, and give its example.
      const schema = parameter.schema as Json | undefined;
      if (parameter.in === 'query' && parameter.description === undefined && typeof schema?.description === 'string') {
        parameter.description = `${schema.description} Otherwise 400 \`invalid\`.`;
        if (schema.example !== undefined) parameter.example = schema.example;
      }
      // On REST, "no project" is the word `none` in the comma list (null on /trpc).
      if (parameter.in === 'query' && parameter.name === 'project_id' && schema) {
        schema.items = { anyOf: [{ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER }, { type: 'string', enum: ['none'] }] };
        schema.example = [3, 'none'];
        parameter.example = [3, 'none'];
      }
      // A comma list: `state=newed,started` (OpenAPI's form style without explode).
      if (parameter.in === 'query' && (parameter.schema as Json | undefined)?.type === 'array') {
        parameter.style = 'form';
        parameter.explode = false;
      }
      if (parameter.in === 'query' && QUERY_PARAMETERS[parameter.name as string]?.kind === 'integer' && parameter.name !== 'page') {
        (parameter.schema as Json).pattern ??= '^(0|[1-9][0-9]*)$';
      }
      if (parameter.in === 'query' && parameter.name === 'page') {
        parameter.required = false;
        parameter.description = 'Page number, from 1 (default 1), written as decimal digits with no sign, leading zero, exponent or space (its `pattern`: `01` or `1e3` is refused). Otherwise 400 `invalid`. Beyond the last page: empty `data`.';
        (parameter.schema as Json).pattern = INTEGER_TEXT;
        parameter.example = 1;
      }
    }

    // What the token needs, from the one table (src/app/scopes.ts): a scope, any token, or
    // none (registration and login say so, rather than inherit nothing).
    operation.security = securityOf(meta.access);

    const conditional = conditionalOf(meta);
    // No examples on these: the docs page's "Try it out" would send them.
    const headerParameters: Json[] = [];
    if (conditional.keyed) {
      headerParameters.push({
        in: 'header', name: 'Idempotency-Key', required: false,
        description: 'Makes a retry safe: the first request with this key runs; a retry with the same method, path and body replays its status and body (`Idempotent-Replayed: true`) for 24 hours. 1 to 255 visible ASCII characters (else 422 `invalid`), per user.',
        schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
      });
    }
    if (conditional.ifMatch) {
      headerParameters.push({
        in: 'header', name: 'If-Match', required: false,
        description: 'The ETag this change is based on (or a list of them, or `*`): 412 `precondition_failed`, changing nothing, when the resource changed since.',
        schema: { type: 'string' },
      });
      headerParameters.push({
        in: 'header', name: 'If-None-Match', required: false,
        description: 'ETags this change must not be based on (or `*`, which every existing resource matches): 412 `precondition_failed`, changing nothing, when one is current (RFC 9110: a write is never 304).',
        schema: { type: 'string' },
      });
    }
    if (conditional.read) {
      headerParameters.push({
        in: 'header', name: 'If-None-Match', required: false,
        description: 'An ETag from an earlier answer: 304 with no body while it is still current.',
        schema: { type: 'string' },
      });
    }
    if (headerParameters.length) operation.parameters = [...((operation.parameters as Json[] | undefined) ?? []), ...headerParameters];

    const requestBody = operation.requestBody as { content: Record<string, Json> } | undefined;
    if (requestBody && docs.request) requestBody.content['application/json']!.examples = docs.request;

    const responses = operation.responses as Record<string, Json>;
    const success = responses['200']!;
    for (const status of Object.keys(responses)) delete responses[status];
    if (meta.successStatus === 204) {
      responses['204'] = { description: 'Done; no content.', headers: responseHeaders(204, conditional) };
    } else {
      const status = meta.successStatus ?? 200;
      const content = success.content as Record<string, Json>;
      if (docs.response !== undefined) content['application/json']!.examples = { default: { summary: 'Success', value: docs.response } };
      responses[String(status)] = {
        description: SUCCESS_TEXT[status] ?? 'OK',
        headers: responseHeaders(status, conditional),
        content,
      };
    }
    if (operationId === 'events-list') describeEventStream(operation);
    if (operationId === 'users-export') describeExport(operation, docs.response);
    if (conditional.read) {
      responses['304'] = { description: 'Not modified: `If-None-Match` names the current ETag. No body.', headers: responseHeaders(304, conditional) };
    }
    for (const { status, codes, note } of errorResponses(meta, operation.requestBody !== undefined, docs)) {
      responses[String(status)] = {
        description: `${STATUS_TEXT[status]}: ${codes.map((c) => `\`${c}\``).join(', ')}${note ? ` (${note})` : ''}`,
        headers: responseHeaders(status, conditional),
        'x-error-codes': codes,
        content: {
          'application/json': {
            schema: { $ref: `#/components/schemas/${status === 410 ? 'CursorExpired' : status === 403 ? 'InsufficientScope' : 'ErrorEnvelope'}` },
            examples: errorExamples(operationId, meta, status, codes),
          },
        },
      };
    }
  }

  const components = doc.components as { schemas?: Record<string, unknown>; headers?: Json };
  const schemas = Object.fromEntries(Object.entries(components.schemas ?? {}).filter(([name]) => !name.startsWith('error.')));
  schemas.ErrorEnvelope = z.toJSONSchema(ErrorEnvelopeSchema, { target: 'draft-2020-12' });
  delete (schemas.ErrorEnvelope as Json).$schema;
  schemas.CursorExpired = z.toJSONSchema(CursorExpiredSchema, { target: 'draft-2020-12' });
  delete (schemas.CursorExpired as Json).$schema;
  schemas.InsufficientScope = z.toJSONSchema(InsufficientScopeSchema, { target: 'draft-2020-12' });
  delete (schemas.InsufficientScope as Json).$schema;
  components.schemas = schemas;
  components.headers = HEADERS;
  describeBatchOperations(doc, '/api/batch');
  return doc;
}

/** The document as committed: stable key order, two-space indent, final newline. */
export function serializeOpenApiDocument(doc: Json): string {
  return JSON.stringify(doc, null, 2) + '\n';
}
