/**
 * openapi.json, generated from the router by trpc-to-openapi and then corrected where the
 * library cannot know the service: success statuses (201, 204), the error envelope of
 * API-CONTRACT.md §2 in place of the library's error bodies, and the token scheme.
 */
import { z } from 'zod';
import { generateOpenApiDocument, type OpenApiMeta } from 'trpc-to-openapi';
import type { ErrorCode } from '../core/errors.js';
import type { AppMeta } from '../core/trpc.js';
import { appRouter } from '../router.js';

export const API_VERSION = '1.0.0';

const ApiErrorSchema = z
  .object({
    status: z.string().meta({ description: 'HTTP status, as a string.', example: '422' }),
    code: z.string().meta({ description: 'Stable snake_case code.', example: 'taken' }),
    title: z.string().meta({ example: 'Resource validation failed' }),
    detail: z.string().meta({ example: 'Project name already exists for this user.' }),
    source: z
      .object({
        pointer: z.string().optional().meta({ description: 'JSON Pointer into the request body.', example: '/project/name' }),
        parameter: z.string().optional().meta({ description: 'Query parameter at fault.', example: 'page' }),
      })
      .optional(),
  })
  .strict();

export const ErrorEnvelopeSchema = z.object({ errors: z.array(ApiErrorSchema).min(1) }).strict();

type Json = Record<string, unknown>;

interface ErrorResponseSpec {
  status: number;
  codes: ErrorCode[];
}

function errorResponses(meta: AppMeta, hasBody: boolean): ErrorResponseSpec[] {
  const domain = meta.errorCodes ?? [];
  const specs: ErrorResponseSpec[] = [];
  const requestCodes = domain.filter((c) => c !== 'login_failed' && c !== 'record_not_found');
  if (hasBody) specs.push({ status: 400, codes: ['invalid_json'] });
  if (meta.queryParameters?.length) specs.push({ status: 400, codes: ['invalid'] });
  if (meta.openapi?.protect !== false) specs.push({ status: 401, codes: ['unauthorized'] });
  if (domain.includes('login_failed')) specs.push({ status: 401, codes: ['login_failed'] });
  if (meta.resource || meta.openapi?.protect !== false) specs.push({ status: 404, codes: meta.resource ? ['record_not_found', 'missing_endpoint'] : ['missing_endpoint'] });
  if (hasBody) specs.push({ status: 413, codes: ['payload_too_large'] }, { status: 415, codes: ['unsupported_media_type'] });
  const unprocessable = [...requestCodes, ...(domain.includes('record_not_found') ? ['record_not_found' as const] : [])];
  if (unprocessable.length) specs.push({ status: 422, codes: unprocessable });
  specs.push({ status: 429, codes: ['rate_limited'] }, { status: 500, codes: ['internal_error'] }, { status: 503, codes: ['service_unavailable'] });
  // Merge entries of one status (400 may come from the body and the query).
  const merged = new Map<number, ErrorCode[]>();
  for (const s of specs) merged.set(s.status, [...new Set([...(merged.get(s.status) ?? []), ...s.codes])]);
  return [...merged].map(([status, codes]) => ({ status, codes }));
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request', 401: 'Unauthorized', 404: 'Not found', 413: 'Payload too large',
  415: 'Unsupported media type', 422: 'Validation failed', 429: 'Too many requests',
  500: 'Internal server error', 503: 'Service unavailable',
};

export function buildOpenApiDocument(): Json {
  const doc = generateOpenApiDocument(appRouter, {
    title: 'Planning service',
    version: API_VERSION,
    description: 'Projects and tasks of the current user. Every operation is also a tRPC procedure at /trpc (superjson). Timestamps are whole Unix seconds (UTC); an unset timestamp is 0.',
    baseUrl: '/',
    tags: ['users', 'projects', 'tasks'],
    securitySchemes: {
      token: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description: 'The access token from registration or login, as `Authorization: <token>` (`Bearer <token>` is accepted too).',
      },
    },
  }) as unknown as Json;

  const paths = doc.paths as Record<string, Record<string, Json>>;
  const procedures = appRouter._def.procedures as unknown as Record<string, { _def: { meta?: AppMeta } }>;
  for (const procedure of Object.values(procedures)) {
    const meta = procedure._def.meta;
    const openapi = (meta as OpenApiMeta | undefined)?.openapi;
    if (!meta || !openapi) continue;
    const operation = paths[openapi.path]?.[openapi.method.toLowerCase()];
    if (!operation) throw new Error(`No operation for ${openapi.method} ${openapi.path}`);
    const responses = operation.responses as Record<string, Json>;
    const success = responses['200']!;
    for (const status of Object.keys(responses)) delete responses[status];
    if (meta.successStatus === 204) {
      responses['204'] = { description: 'Done; no content.' };
    } else {
      responses[String(meta.successStatus ?? 200)] = {
        ...success,
        description: meta.successStatus === 201 ? 'Created' : 'OK',
      };
    }
    for (const { status, codes } of errorResponses(meta, operation.requestBody !== undefined)) {
      responses[String(status)] = {
        description: `${STATUS_TEXT[status]}: ${codes.map((c) => `\`${c}\``).join(', ')}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
      };
    }
  }

  const components = doc.components as { schemas?: Record<string, unknown> };
  const schemas = Object.fromEntries(Object.entries(components.schemas ?? {}).filter(([name]) => !name.startsWith('error.')));
  schemas.ErrorEnvelope = z.toJSONSchema(ErrorEnvelopeSchema, { target: 'draft-2020-12' });
  delete (schemas.ErrorEnvelope as Json).$schema;
  components.schemas = schemas;
  return doc;
}

/** The document as committed: stable key order, two-space indent, final newline. */
export function serializeOpenApiDocument(doc: Json): string {
  return JSON.stringify(doc, null, 2) + '\n';
}
