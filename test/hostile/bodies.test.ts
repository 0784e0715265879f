/**
 * Hostile request bodies on every write endpoint, property-based (fast-check), through both
 * doors (the harness: test/helpers/hostile.ts): random and adversarial bodies (wrong types,
 * raw big numbers, long strings, NUL, lone surrogates, prototype keys, deep nesting) get a 2xx
 * or a 4xx error envelope, never a 5xx or a hang, and a refused one changes nothing. The
 * counterexamples found are pinned. HOSTILE_RUNS=<n> runs every property n times (default 60).
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { assertHostile, bodyArb, deepArray, deepObject, describeAfterTheRun, type Door, expectContract, expectUnchanged, type FieldArbs, isPlain, judgeRest, MAX_TIMESTAMP, newVictim, NOW, other, own, PROPERTY_TIMEOUT, raw, rest, snapshot, trpc, trpcRaw, useHostileApp, type Victim } from '../helpers/hostile.js';
import { DAY } from '../helpers/test-app.js';

const app = useHostileApp();

// ---------------------------------------------------------------------------------------------
// The write endpoints
// ---------------------------------------------------------------------------------------------

interface WriteEndpoint {
  procedure: string;
  method: 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** REST path for a path id (ignored when the endpoint has none). */
  path: (id: string) => string;
  resource?: 'project' | 'task';
  wrapper: string | null;
  /** Plausible values of each member, mixed with hostile ones. */
  fields: (v: Victim) => FieldArbs;
  /** No token needed. */
  anonymous?: boolean;
  /** Bodies always tried first (counterexamples found earlier, pinned). */
  examples?: unknown[];
}

const projectState = fc.constantFrom('started', 'paused', 'finished', 'newed', 'abandoned', 'STARTED');
const taskState = fc.constantFrom('newed', 'started', 'planned', 'finished', 'abandoned', 'Planned', 'bogus');

const WRITE_ENDPOINTS: WriteEndpoint[] = [
  {
    procedure: 'users.register', method: 'POST', path: () => '/api/users', wrapper: 'user', anonymous: true,
    fields: () => ({
      username: fc.stringMatching(/^[a-z0-9_-]{1,12}$/),
      password: fc.string({ minLength: 8, maxLength: 20 }),
    }),
  },
  {
    procedure: 'users.authorize', method: 'POST', path: () => '/api/users/authorizations', wrapper: null, anonymous: true,
    fields: (v) => ({
      username: fc.constantFrom(v.username, 'nobody', v.username.toUpperCase()),
      password: fc.constantFrom('correct horse', 'wrong horse', 'correct horse '),
    }),
    // Found by this property: a NUL in the username reaches PostgreSQL and is a 500.
    examples: [{ username: raw('"a\\u0000b"'), password: 'correct horse' }, { username: '\u0000', password: '\u0000' }],
  },
  {
    procedure: 'projects.create', method: 'POST', path: () => '/api/users/me/projects', wrapper: 'project',
    fields: () => ({ name: fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/), fc.constantFrom('Alpha', 'alpha', 'BETA')) }),
  },
  {
    procedure: 'projects.update', method: 'PATCH', path: (id) => `/api/projects/${id}`, resource: 'project', wrapper: 'project',
    fields: () => ({
      name: fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/), fc.constantFrom('Alpha', 'beta')),
      description: fc.string({ maxLength: 40 }),
      due_at: fc.oneof(fc.integer({ min: 0, max: MAX_TIMESTAMP }), fc.constantFrom(NOW + 20 * DAY, NOW - 20 * DAY)),
    }),
  },
  {
    procedure: 'projects.changeState', method: 'PUT', path: (id) => `/api/projects/${id}/state`, resource: 'project', wrapper: 'project',
    fields: () => ({
      state: projectState,
      due_at: fc.constantFrom(NOW + 3 * DAY, NOW, NOW - DAY, 0),
      finished_at: fc.constantFrom(NOW, NOW - DAY, NOW + 3 * DAY),
    }),
  },
  {
    procedure: 'projects.delete', method: 'DELETE', path: (id) => `/api/projects/${id}`, resource: 'project', wrapper: null,
    fields: () => ({}),
  },
  {
    procedure: 'tasks.create', method: 'POST', path: () => '/api/users/me/tasks', wrapper: 'task',
    fields: (v) => ({
      label: fc.string({ minLength: 1, maxLength: 30 }),
      planned_at: fc.oneof(fc.integer({ min: 0, max: MAX_TIMESTAMP }), fc.constant(NOW + DAY)),
      project_id: fc.constantFrom(...v.projectIds, ...other().projectIds, null),
    }),
  },
  {
    procedure: 'tasks.update', method: 'PATCH', path: (id) => `/api/tasks/${id}`, resource: 'task', wrapper: 'task',
    fields: (v) => ({
      label: fc.string({ minLength: 1, maxLength: 30 }),
      project_id: fc.constantFrom(...v.projectIds, ...other().projectIds, null),
    }),
  },
  {
    procedure: 'tasks.changeState', method: 'PUT', path: (id) => `/api/tasks/${id}/state`, resource: 'task', wrapper: 'task',
    fields: () => ({ state: taskState }),
  },
  {
    procedure: 'tasks.reorder', method: 'PUT', path: (id) => `/api/tasks/${id}/order`, resource: 'task', wrapper: 'task',
    fields: () => ({ order: fc.integer({ min: 1, max: 8 }) }),
  },
];

/** The tRPC input of a REST request: the path id joins the body's members. */
function trpcInput(body: unknown, id: number | undefined): unknown {
  if (id === undefined) return body;
  return isPlain(body) ? own([...Object.entries(body), ['id', id]]) : body;
}

describe.each(WRITE_ENDPOINTS)('random bodies: $method $procedure', (endpoint) => {
  it.each(['rest', 'trpc'] as Door[])('through %s: a 2xx or a 4xx envelope, and a refusal changes nothing', async (door) => {
    const victim = await newVictim();
    const ids = endpoint.resource === 'project' ? victim.projectIds : victim.taskIds;
    const isDelete = endpoint.procedure === 'projects.delete';
    let scratch = 0;
    /** DELETE targets a project made for the run, so that the fixtures stay. */
    let target: number | undefined;

    const arb = fc.record({
      body: bodyArb(endpoint.wrapper, endpoint.fields(victim)),
      id: endpoint.resource && !isDelete ? fc.constantFrom(...ids) : fc.constant(undefined),
      viaRaw: fc.boolean(),
    });
    await assertHostile(
      victim,
      arb,
      async ({ body, id, viaRaw }) => {
        const pathId = isDelete ? target : endpoint.resource ? id : undefined;
        const token = endpoint.anonymous ? undefined : victim.token;
        if (door === 'rest') return rest(endpoint.method, endpoint.path(String(pathId)), token, body);
        return trpc(endpoint.procedure, 'mutation', token, trpcInput(body, pathId), viaRaw);
      },
      {
        before: isDelete
          ? async () => {
              const res = await app.request('POST', '/api/users/me/projects', { token: victim.token, body: { project: { name: `Scratch${++scratch}` } } });
              target = res.body.data.id;
            }
          : undefined,
        examples: [
          ...(endpoint.examples ?? []).flatMap((body) => [
            { body, id: ids[0], viaRaw: false },
            { body, id: ids[0], viaRaw: true },
          ]),
          { body: JSON.parse('{"__proto__":{"polluted":"yes"}}'), id: ids[0], viaRaw: true },
          { body: own([[endpoint.wrapper ?? 'x', JSON.parse('{"constructor":{"prototype":{"polluted":"yes"}}}')]]), id: ids[0], viaRaw: true },
          { body: deepObject, id: ids[0], viaRaw: false },
          { body: own([[endpoint.wrapper ?? 'x', deepArray]]), id: ids[1], viaRaw: true },
          { body: null, id: ids[0], viaRaw: false },
          { body: [], id: ids[0], viaRaw: true },
        ],
      },
    );
  }, PROPERTY_TIMEOUT + 5_000);
});

describe('pinned counterexamples of the body properties', () => {
  // Shrunk by fast-check from the users.authorize property (tRPC door; REST fails alike).
  it.each([
    ['rest', '{"username":"a\\u0000b","password":"correct horse"}'],
    ['rest', '{"username":"\\u0000","password":"x"}'],
    ['trpc', '{"username":"a\\u0000b","password":"correct horse"}'],
  ] as const)('POST /api/users/authorizations through %s with a NUL in the username: %s', async (door, text) => {
    const victim = await newVictim();
    const before = await snapshot(victim);
    const outcome =
      door === 'rest'
        ? judgeRest(`POST /api/users/authorizations body=${text}`, await app.request('POST', '/api/users/authorizations', { rawBody: text, headers: { 'Content-Type': 'application/json' } }))
        : await trpcRaw('users.authorize', 'mutation', undefined, `{"json":${text}}`);
    expectContract(outcome);
    await expectUnchanged(victim, before);
  });
});

describeAfterTheRun();
