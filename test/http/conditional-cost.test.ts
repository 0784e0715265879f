/**
 * What the headers of API-CONTRACT.md §11 cost in SQL statements, counted like
 * test/http/query-count.test.ts (every statement the ORM sends, begin and commit included):
 * a create with an Idempotency-Key costs one statement more than without (the key's claim;
 * its record is read by the owner's lock statement and stored by the events' statement);
 * its replay costs the claim and the owner's lock; a list with a matching If-None-Match
 * costs the token's statement alone; If-Match costs one read under the lock.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ManualClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';
import { Announcer } from '../../src/writes/announcer.js';

let orm: MikroORM;
let server: Server;
let baseUrl = '';
let log: string[] | null = null;
let announcer: Announcer;

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), {
    migrate: true,
    poolSize: 5,
    onQuery: (line) => {
      if (log && line.startsWith('[query]')) log.push(line);
    },
  });
  announcer = new Announcer(() => orm.em.fork());
  server = createServer(createApp({ orm, announcer, clock: new ManualClock(T0), logger: createLogger('silent'), trustProxy: false, passwordHashCost: 1024 }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await orm?.close(true);
});

async function call(method: string, path: string, token: string | undefined, body?: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { ...headers };
  if (token) h.Authorization = token;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  log = [];
  const res = await fetch(baseUrl + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  // A write's NOTIFY is sent after its answer (src/writes/announcer.ts): it counts as the write's.
  await announcer.idle();
  // The background prune of expired keys (started by keyed writes, at most once a minute) is
  // no statement of the request's own.
  const sql = log.filter((line) => !/delete from idempotency_keys|from idempotency_keys where created_at <=/.test(line));
  log = null;
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, sql };
}

const shown = (sql: string[]) => sql.join('\n');

describe('statements per request with the new headers', () => {
  it('a keyed or conditional write costs what a plain one costs; a replay runs no work; a 304 list, the token alone', async () => {
    const { meta } = (await call('POST', '/api/users', undefined, { user: { username: 'cost', password: 'correct horse' } })).body;
    const token = meta.token as string;
    const plain = await call('POST', '/api/users/me/tasks', token, { task: { label: 'plain' } });
    const keyed = await call('POST', '/api/users/me/tasks', token, { task: { label: 'keyed' } }, { 'Idempotency-Key': 'cost-1' });
    expect([plain.status, keyed.status]).toEqual([201, 201]);
    // A write is one call of its write function after the token's lookup, then the NOTIFY of its
    // events (docs/design/writes.md); the key's claim, its record and its storing are in the call.
    expect(plain.sql.length, shown(plain.sql)).toBe(3);
    expect(keyed.sql.length, shown(keyed.sql)).toBe(3);
    const replay = await call('POST', '/api/users/me/tasks', token, { task: { label: 'keyed' } }, { 'Idempotency-Key': 'cost-1' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    // token; the call, which finds the record and replays it: no event, no NOTIFY
    expect(replay.sql.length, shown(replay.sql)).toBe(2);

    // A list answered 304: the token's statement, which also reads the list's version.
    const list = await call('GET', '/api/users/me/tasks', token);
    const notModified = await call('GET', '/api/users/me/tasks', token, undefined, { 'If-None-Match': list.headers.get('etag')! });
    expect(notModified.status).toBe(304);
    expect(notModified.sql.length, shown(notModified.sql)).toBe(1);
    const projects = await call('GET', '/api/users/me/projects', token);
    expect((await call('GET', '/api/users/me/projects', token, undefined, { 'If-None-Match': projects.headers.get('etag')! })).sql.length).toBe(1);

    // If-Match: compared by the write function under the user's lock, in the same call.
    const id = plain.body.data.id;
    const unconditional = await call('PATCH', `/api/tasks/${id}`, token, { task: { label: 'a' } });
    const conditional = await call('PATCH', `/api/tasks/${id}`, token, { task: { label: 'b' } }, { 'If-Match': unconditional.headers.get('etag')! });
    expect(conditional.status).toBe(200);
    expect(unconditional.sql.length, shown(unconditional.sql)).toBe(3);
    expect(conditional.sql.length, shown(conditional.sql)).toBe(3);
  });

  it("a create's ETag is the one GET then answers with", async () => {
    const { meta } = (await call('POST', '/api/users', undefined, { user: { username: 'cost2', password: 'correct horse' } })).body;
    const token = meta.token as string;
    const project = await call('POST', '/api/users/me/projects', token, { project: { name: 'E' } });
    const task = await call('POST', '/api/users/me/tasks', token, { task: { label: 'e' } });
    expect(project.headers.get('etag')).toBe((await call('GET', `/api/projects/${project.body.data.id}`, token)).headers.get('etag'));
    expect(task.headers.get('etag')).toBe((await call('GET', `/api/tasks/${task.body.data.id}`, token)).headers.get('etag'));
  });
});
