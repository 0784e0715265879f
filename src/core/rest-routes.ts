/**
 * The REST routes: every procedure whose meta has `openapi` answers its `method` at its
 * `path`, the routes openapi.json describes. They are matched as trpc-to-openapi matches
 * them (its `createProcedureCache`): the request path without a leading or trailing slash,
 * `{name}` standing for one segment, letters in either case, the first route in the
 * router's order winning. What a call needs from its input schema is worked out here once:
 * whether it takes no input, and which members are arrays.
 *
 * The library itself is not loaded to serve a request, only to build the document (its
 * generator and adapters are about 13 MiB and 150 ms of a start). test/rules/rest-routes.test.ts
 * holds these routes to the library's: same procedure and path members for every route and
 * for paths around them, same input handling, and its per-call `coerceSchema` a no-op on
 * every input (src/core/fields.ts pins the numbers of inputs to strict).
 */
import type { AnyTRPCProcedure, AnyTRPCRouter } from '@trpc/server';
import type { z } from 'zod';
import type { AppMeta } from './context.js';

/** A procedure of the REST door, with what its calls need worked out once. */
export interface RestProcedure {
  /** Its tRPC path (`tasks.list`). */
  path: string;
  procedure: AnyTRPCProcedure;
  type: 'query' | 'mutation';
  meta: AppMeta;
  /** The input is void (revoke, a stream ticket): the call gets none. */
  takesNoInput: boolean;
  /**
   * Its input has members besides the path's and the query's: a method that reads a body
   * wants one (JSON). Else (a webhook's test or secret: the path id alone) none is needed,
   * as openapi.json documents no request body for it.
   */
  takesBody: boolean;
  /** Of an object input: its array members (a single query value becomes an array of one). */
  arrayMembers: string[];
}

export interface RestMatch {
  procedure: RestProcedure;
  /** The path's `{name}` members, as written in the request. */
  pathInput: Record<string, string>;
}

/** Whether the method's input comes from the body (else from the query). */
export const readsBody = (method: string): boolean => method !== 'GET' && method !== 'DELETE';

/** A path without a leading or trailing slash, with one in front. */
export const normalizePath = (path: string): string => `/${path.replace(/^\/|\/$/g, '')}`;

type Schema = z.core.$ZodType & { _zod: { def: { type: string; innerType?: Schema; in?: Schema; out?: Schema; getter?: () => Schema } } };

/** The schema a request's members are read into: through optional, nullable, default, lazy and pipe wrappers. */
function unwrapped(schema: Schema | undefined): Schema | undefined {
  for (let s = schema; s; ) {
    const def = s._zod.def;
    if (def.innerType && ['optional', 'nullable', 'default', 'prefault'].includes(def.type)) s = def.innerType;
    else if (def.type === 'lazy' && def.getter) s = def.getter();
    else if (def.type === 'pipe') s = def.out?._zod.def.type === 'transform' ? def.in : def.out;
    else return s;
  }
  return undefined;
}

const isArray = (schema: Schema | undefined) => schema?._zod.def.type === 'array';

/** The schema a procedure's input is read into, and its type (`object`, `void`, ...). */
function inputOf(procedure: AnyTRPCProcedure): { input: Schema | undefined; type: string | undefined } {
  const inputs = procedure._def.inputs as Schema[];
  const input = inputs.length === 1 ? unwrapped(inputs[0]) : undefined;
  return { input, type: input?._zod.def.type };
}

/** Whether the procedure takes no input (void: revoke, a stream ticket); on either door it then reads no body. */
export function takesNoInput(procedure: AnyTRPCProcedure): boolean {
  const { type } = inputOf(procedure);
  return type === 'void' || type === 'undefined' || type === 'never';
}

function prepare(path: string, procedure: AnyTRPCProcedure): RestProcedure {
  const { input, type } = inputOf(procedure);
  const shape = type === 'object' ? ((input as unknown as z.ZodObject).shape as Record<string, Schema>) : {};
  const meta = procedure._def.meta as AppMeta;
  const outsideBody = new Set([...(meta.queryParameters ?? []), ...[...(meta.openapi?.path ?? '').matchAll(/\{(.+?)\}/g)].map((m) => m[1]!)]);
  return {
    path,
    procedure,
    type: procedure._def.type as RestProcedure['type'],
    meta,
    takesNoInput: takesNoInput(procedure),
    takesBody: type !== 'object' ? !takesNoInput(procedure) : Object.keys(shape).some((key) => !outsideBody.has(key)),
    arrayMembers: Object.keys(shape).filter((key) => {
      const member = shape[key]!;
      return isArray(member) || (member._zod.def.type === 'optional' && isArray(member._zod.def.innerType));
    }),
  };
}

/** Routes of the router's procedures that have `meta.openapi` (subscriptions have none here). */
export function restRoutes(router: AnyTRPCRouter): (method: string, path: string) => RestMatch | undefined {
  const byMethod = new Map<string, Array<{ pattern: RegExp; procedure: RestProcedure }>>();
  for (const [path, procedure] of Object.entries(router._def.procedures as Record<string, AnyTRPCProcedure>)) {
    const openapi = (procedure._def.meta as AppMeta | undefined)?.openapi;
    if (!openapi || openapi.enabled === false || procedure._def.type === 'subscription') continue;
    const source = normalizePath(openapi.path).replace(/\{(.+?)\}/g, (_, name: string) => `(?<${name}>[^/]+)`);
    const routes = byMethod.get(openapi.method) ?? [];
    routes.push({ pattern: new RegExp(`^${source}$`, 'i'), procedure: prepare(path, procedure) });
    byMethod.set(openapi.method, routes);
  }
  return (method, path) => {
    const normalized = normalizePath(path);
    for (const route of byMethod.get(method) ?? []) {
      const match = route.pattern.exec(normalized);
      if (match) return { procedure: route.procedure, pathInput: { ...match.groups } };
    }
    return undefined;
  };
}

/** The route the REST door matched each request to (null: none), kept on the request for what labels it afterwards. */
const matchedRoutes = new WeakMap<object, RestMatch | null>();

/**
 * Keeps the route the REST door matched `req` to (src/http/rest.ts), so that what labels the
 * request afterwards (the metrics' operation: src/metrics/service-metrics.ts) reads it
 * instead of matching the request against the routes a second time.
 */
export function noteRestMatch(req: object, match: RestMatch | undefined): void {
  matchedRoutes.set(req, match ?? null);
}

/** The route the REST door matched `req` to: the match, null for none, undefined when the request did not reach the door. */
export function notedRestMatch(req: object): RestMatch | null | undefined {
  return matchedRoutes.get(req);
}
