/**
 * What the tests of webhooks as their owner manages them share (test/http/webhooks.test.ts,
 * webhooks-actions.test.ts): the file's app with a SQL connection to its database, the
 * routes, a webhook document as API-CONTRACT.md §14 describes it, a webhook that must be
 * created, the rows of a user's webhooks, the pruning retention does, and a tRPC call's
 * failure.
 */
import { TRPCClientError } from '@trpc/client';
import { expect } from 'vitest';
import type pg from 'pg';
import { T0, seconds, type TestApp, useTestAppWithSql } from './test-app.js';

let app: TestApp;
let db: pg.Client;

/** The file's app and SQL connection (useTestAppWithSql, the clock back at T0 before each test), for the helpers below as well. */
export function useWebhookApp(): { app: TestApp; db: pg.Client } {
  ({ app, db } = useTestAppWithSql({ resetClock: true }));
  return { app, db };
}

export const HOOKS = '/api/users/me/webhooks';
export const ONE = (id: number | string) => `/api/webhooks/${id}`;
export const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
export const URL_2048 = `https://hooks.example.com/${'a'.repeat(2048 - 'https://hooks.example.com/'.length)}`;
export const HOUR_MS = 3_600_000;

export type Json = Record<string, any>;

export interface Attributes {
  url: string;
  events: string[];
  description: string;
  state: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: number;
  lastEventId: string;
}

/** A webhook document as §14 describes it: the defaults of a new webhook unless given. */
export function webhookJson(id: number, attributes: Partial<Attributes> & { url: string; lastEventId: string }) {
  return {
    type: 'webhook',
    id,
    attributes: { events: ['*'], description: '', state: 'enabled', disabledReason: null, createdAt: seconds(T0), ...attributes },
  };
}

export const create = (token: string, webhook: unknown) => app.request('POST', HOOKS, { token, body: { webhook } });
export const patch = (token: string, id: number | string, webhook: unknown) => app.request('PATCH', ONE(id), { token, body: { webhook } });
export const replay = (token: string, id: number | string, after: unknown) => app.request('POST', `${ONE(id)}/replay`, { token, body: { replay: { after } } });

/** Creates a webhook that must land; returns its document and secret. */
export async function created(token: string, webhook: Json = {}): Promise<{ id: number; data: Json; secret: string }> {
  const res = await create(token, { url: 'https://hooks.example.com/planning', ...webhook });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, data: res.body.data, secret: res.body.meta.secret };
}

/** The newest event id of the user's change log, as the feed gives it. */
export async function newestEventId(token: string): Promise<string> {
  const res = await app.request('GET', '/api/users/me/events', { token });
  expect(res.status).toBe(200);
  return res.body.meta.last_event_id;
}

/** A few writes, so that the user's log does not stand at "0". */
export async function someWrites(token: string, n = 3): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: `write ${i}` } } });
    expect(res.status).toBe(201);
  }
}

/** Every column of the user's webhooks, and the number of their attempts. */
export async function rowsOf(userId: number) {
  const webhooks = (await db.query('select * from webhooks where user_id = $1 order by id', [userId])).rows;
  const deliveries = (await db.query('select count(*)::int as n from webhook_deliveries where user_id = $1', [userId])).rows[0].n;
  return { webhooks, deliveries };
}

export async function rowOf(userId: number, id: number): Promise<Json> {
  const [row] = (await db.query('select *, cursor::text as cursor from webhooks where user_id = $1 and id = $2', [userId, id])).rows;
  return row;
}

/** Removes the user's events up to `through`, as retention does, and marks them pruned. */
export async function prune(userId: number, through: number): Promise<void> {
  await db.query('delete from events where user_id = $1 and seq <= $2', [userId, through]);
  await db.query('update users set events_pruned_through = $2 where id = $1', [userId, through]);
}

export interface TrpcFailure {
  code: string;
  httpStatus: number;
  errors: Json[];
  meta?: Json;
}

/** The error data of a tRPC call that must fail. */
export async function trpcFailure(call: Promise<unknown>): Promise<TrpcFailure> {
  const error = await call.then(
    (value) => {
      throw new Error(`expected a tRPC error, got ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  if (!(error instanceof TRPCClientError)) throw error;
  return error.data as TrpcFailure;
}

export const pairs = (errors: Json[]) => errors.map((e) => [e.code, e.source?.pointer]);

/** The routes of one webhook, by its id. */
export interface IdRoute {
  procedure: 'get' | 'update' | 'delete' | 'deliveries' | 'replay' | 'test' | 'rotateSecret';
  method: string;
  path: (id: string) => string;
  /** A body the route would accept for the user's own webhook. */
  body?: Json;
  kind: 'query' | 'mutation';
}

export const ID_ROUTES: IdRoute[] = [
  { procedure: 'get', method: 'GET', path: ONE, kind: 'query' },
  { procedure: 'update', method: 'PATCH', path: ONE, body: { webhook: { url: 'https://attacker.example.com/', description: 'mine now', state: 'disabled' } }, kind: 'mutation' },
  { procedure: 'delete', method: 'DELETE', path: ONE, kind: 'mutation' },
  { procedure: 'deliveries', method: 'GET', path: (id) => `${ONE(id)}/deliveries`, kind: 'query' },
  { procedure: 'replay', method: 'POST', path: (id) => `${ONE(id)}/replay`, body: { replay: { after: '0' } }, kind: 'mutation' },
  { procedure: 'test', method: 'POST', path: (id) => `${ONE(id)}/test`, body: {}, kind: 'mutation' },
  { procedure: 'rotateSecret', method: 'POST', path: (id) => `${ONE(id)}/secret`, body: {}, kind: 'mutation' },
];
