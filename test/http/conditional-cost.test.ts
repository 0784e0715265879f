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

let orm: MikroORM;
let server: Server;
let baseUrl = '';
let log: string[] | null = null;

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), {
    migrate: true,
    poolSize: 5,
    onQuery: (line) => {
      if (log && line.startsWith('[query]')) log.push(line);
    },
  });
  server = createServer(createApp({ orm, clock: new ManualClock(T0), logger: createLogger('silent'), trustProxy: false, passwordHashCost: 1024 }));
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
  // The background prune of expired keys (started by keyed writes, at most once a minute) is
  // no statement of the request's own.
  const sql = log.filter((line) => !/delete from idempotency_keys|from idempotency_keys where created_at <=/.test(line));
  log = null;
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, sql };
}

const shown = (sql: string[]) => sql.join('\n');

describe('statements per request with the new headers', () => {
  it('a keyed create costs one statement more than the same create as a transaction; a replay runs no work; a 304 list, the token alone; If-Match, one read', async () => {
    const { meta } = (await call('POST', '/api/users', undefined, { user: { username: 'cost', password: 'correct horse' } })).body;
    const token = meta.token as string;
    const plain = await call('POST', '/api/users/me/tasks', token, { task: { label: 'plain' } });
    const keyed = await call('POST', '/api/users/me/tasks', token, { task: { label: 'keyed' } }, { 'Idempotency-Key': 'cost-1' });
    expect([plain.status, keyed.status]).toEqual([201, 201]);
    // A plain create is one statement after the token's (src/writes/user-write.ts OneStatement),
    // in a transaction of its own with its NOTIFY: token; begin, the owner's lock, the
    // statement, NOTIFY, commit.
    expect(plain.sql.length, shown(plain.sql)).toBe(6);
    // A keyed one reads its record under the owner's lock before the work, so it runs as the
    // transaction every write can run as (token; begin, lock owner, insert, events, their
    // NOTIFY, commit), plus the key's advisory lock; its record rides in the events' statement.
    expect(keyed.sql.length, shown(keyed.sql)).toBe(7 + 1);
    const replay = await call('POST', '/api/users/me/tasks', token, { task: { label: 'keyed' } }, { 'Idempotency-Key': 'cost-1' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    // token; begin, claim, owner's lock with the record, commit
    expect(replay.sql.length, shown(replay.sql)).toBe(5);

    // A list answered 304: the token's statement, which also reads the list's version.
    const list = await call('GET', '/api/users/me/tasks', token);
    const notModified = await call('GET', '/api/users/me/tasks', token, undefined, { 'If-None-Match': list.headers.get('etag')! });
    expect(notModified.status).toBe(304);
    expect(notModified.sql.length, shown(notModified.sql)).toBe(1);
    const projects = await call('GET', '/api/users/me/projects', token);
    expect((await call('GET', '/api/users/me/projects', token, undefined, { 'If-None-Match': projects.headers.get('etag')! })).sql.length).toBe(1);

    // If-Match: the write's transaction form, with one read of the current version under the
    // owner's lock (token; begin, lock, version, the change, events, their NOTIFY, commit), where
    // the write without it is its one statement (token; begin, lock, the statement, NOTIFY, commit).
    const id = plain.body.data.id;
    const unconditional = await call('PATCH', `/api/tasks/${id}`, token, { task: { label: 'a' } });
    const conditional = await call('PATCH', `/api/tasks/${id}`, token, { task: { label: 'b' } }, { 'If-Match': unconditional.headers.get('etag')! });
    expect(conditional.status).toBe(200);
    expect(unconditional.sql.length, shown(unconditional.sql)).toBe(6);
    expect(conditional.sql.length, shown(conditional.sql)).toBe(8);
    expect(conditional.sql.filter((line) => line.includes('select version from tasks'))).toHaveLength(1);
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
