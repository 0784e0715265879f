/**
 * The same mistake answers alike on both doors (API-CONTRACT.md §2, §10):
 * - a create or a registration with no input, or `null`, is `parameter_missing` on the missing
 *   wrapper (`/task`, `/project`, `/user`) on /trpc as on REST, not on the root;
 * - a malformed cursor is 400 `invalid` on its parameter on every way of reading the change
 *   log (events.list `after`, the REST stream's Last-Event-ID and `after`, events.onChange's
 *   `lastEventId`), and no message shows a validation pattern;
 * - an error raised after a tRPC subscription started carries the JSON-RPC code of its
 *   status (401 UNAUTHORIZED, 410 as NOT_FOUND, 429 TOO_MANY_REQUESTS), as the same errors
 *   do on queries and mutations, not -32603 (internal).
 */
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import { describe, expect, it } from 'vitest';
import { MAX_STREAMS_PER_TOKEN } from '../../src/changes/event-hub.js';
import { createClient } from '../../src/client.js';
import { useTestAppWithSql } from '../helpers/test-app.js';
import { openStream } from '../helpers/sse.js';

const { app, db } = useTestAppWithSql({ eventsIdleMs: 150 });
const EVENTS = '/api/users/me/events';

async function trpcPost(path: string, token: string | undefined, body: string | undefined) {
  const res = await fetch(`${app.baseUrl}/trpc/${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: token } : {}) },
    body,
  });
  return { status: res.status, errors: ((await res.json()) as any).error?.json?.data?.errors };
}

async function restPost(path: string, token: string | undefined, body: string | undefined) {
  const res = await fetch(`${app.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: token } : {}) },
    body,
  });
  return { status: res.status, errors: ((await res.json()) as any).errors };
}

describe('an absent or null input', () => {
  it.each([
    ['tasks.create', '/api/users/me/tasks', '/task'],
    ['projects.create', '/api/users/me/projects', '/project'],
    ['users.register', '/api/users', '/user'],
  ])('%s is parameter_missing on the wrapper on both doors', async (procedure, route, pointer) => {
    const { token } = await app.register();
    const auth = procedure === 'users.register' ? undefined : token;
    const rest = await restPost(route, auth, undefined);
    expect(rest.status).toBe(422);
    expect(rest.errors).toEqual([expect.objectContaining({ code: 'parameter_missing', source: { pointer } })]);
    for (const body of [undefined, JSON.stringify({ json: null })]) {
      const trpc = await trpcPost(procedure, auth, body);
      expect({ status: trpc.status, errors: trpc.errors }, `/trpc/${procedure} with ${body ?? 'no input'}`).toEqual(rest);
    }
  });
});

/**
 * The first error a tRPC subscription reports. Bounded: a client that takes an error for a
 * passing fault (-32603) reconnects instead of reporting it, and the test must then fail.
 */
function subscriptionError(token: string, input: { lastEventId?: string } | undefined): Promise<any> {
  const api = createClient({ url: app.baseUrl, token });
  return new Promise((resolve, reject) => {
    const bound = setTimeout(() => reject(new Error('the subscription reported no error within 5 s')), 5_000);
    const sub = api.events.onChange.subscribe(input, {
      onData: () => undefined,
      onError: (error) => {
        clearTimeout(bound);
        sub.unsubscribe();
        resolve(error);
      },
    });
  });
}

describe('a malformed cursor', () => {
  it('is 400 invalid on its parameter on every way of reading the log, without a pattern in the message', async () => {
    const { token } = await app.register();
    const list = await app.request('GET', `${EVENTS}?after=x1`, { token });
    expect(list.status).toBe(400);
    expect(list.body.errors[0]).toMatchObject({ status: '400', code: 'invalid', source: { parameter: 'after' } });

    const header = await openStream(`${app.baseUrl}${EVENTS}`, { Authorization: token, 'Last-Event-ID': 'x1' });
    expect(header.status).toBe(400);
    expect(JSON.parse(header.text!).errors[0]).toMatchObject({ code: 'invalid', source: { parameter: 'Last-Event-ID' } });

    const error = await subscriptionError(token, { lastEventId: 'x1' });
    expect(error.data).toMatchObject({ code: 'invalid', httpStatus: 400 });
    expect(error.data.errors).toEqual([expect.objectContaining({ status: '400', code: 'invalid', source: { parameter: 'lastEventId' } })]);
    expect(error.shape.code).toBe(TRPC_ERROR_CODES_BY_KEY.BAD_REQUEST);
    for (const message of [error.message, list.body.errors[0].detail]) expect(message).not.toMatch(/[\^$\\[\]]/);
  });
});

describe('an error after a tRPC subscription started', () => {
  it('carries UNAUTHORIZED when the token is revoked', async () => {
    const { token } = await app.register();
    const api = createClient({ url: app.baseUrl, token });
    const error = new Promise<any>((resolve) => {
      const sub = api.events.onChange.subscribe({ lastEventId: '0' }, {
        onStarted: () => void app.request('DELETE', '/api/users/me/authorizations/current', { token }),
        onData: () => undefined,
        onError: (e) => {
          sub.unsubscribe();
          resolve(e);
        },
      });
    });
    const e = await error;
    expect(e.data).toMatchObject({ code: 'unauthorized', httpStatus: 401 });
    expect(e.shape.code).toBe(TRPC_ERROR_CODES_BY_KEY.UNAUTHORIZED);
  });

  it('carries NOT_FOUND with cursor_expired (410) for a cursor older than what is kept', async () => {
    const { id, token } = await app.register();
    await db.query('update users set last_event_seq = 10, events_pruned_through = 5 where id = $1', [id]);
    const e = await subscriptionError(token, { lastEventId: '2' });
    expect(e.data).toMatchObject({ code: 'cursor_expired', httpStatus: 410 });
    expect(e.shape.code).toBe(TRPC_ERROR_CODES_BY_KEY.NOT_FOUND);
  });

  it(`carries TOO_MANY_REQUESTS for the stream past ${MAX_STREAMS_PER_TOKEN} of one token`, async () => {
    const { token } = await app.register();
    const open = await Promise.all(
      Array.from({ length: MAX_STREAMS_PER_TOKEN }, () => openStream(`${app.baseUrl}${EVENTS}?after=0`, { Authorization: token })),
    );
    try {
      expect(open.map((s) => s.status)).toEqual(Array(MAX_STREAMS_PER_TOKEN).fill(200));
      const e = await subscriptionError(token, { lastEventId: '0' });
      expect(e.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
      expect(e.shape.code).toBe(TRPC_ERROR_CODES_BY_KEY.TOO_MANY_REQUESTS);
    } finally {
      for (const s of open) s.close();
    }
  });
});
