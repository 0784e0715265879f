/**
 * The fast tier: the app's procedures called directly (tRPC's createCaller), without HTTP,
 * on a database of the file's own on the run's PostgreSQL, with a clock the test moves.
 * For the rules of the service (state machines, input validation) whose answers do not
 * depend on the door; what HTTP adds (statuses on the wire, headers, REST routing and bodies)
 * stays with the tests that use `useTestApp`.
 */
import { testResolver } from './test-resolver.js';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ManualClock } from '../../src/core/clock.js';
import { toErrorResponse } from '../../src/core/failures.js';
import { createContextInner, type Context } from '../../src/core/context.js';
import { Announcer } from '../../src/writes/announcer.js';
import { REFUSAL_STATE, type Refusal } from '../../src/writes/write-functions.js';
import { openOrm } from '../../src/app/orm.js';
import { writes } from '../../src/app/write-functions.js';
import { createCaller } from '../../src/app/router.js';
import { authenticate } from '../../src/users/authentication.js';
import { errorShape, type Source } from './envelope.js';
import { T0, createTestDatabase } from './test-app.js';

export type Caller = ReturnType<typeof createCaller>;

export interface ProcedureOptions {
  /** Sets the clock back to T0 before each test. */
  resetClock?: boolean;
}

/**
 * The procedures of a test file: registers the hooks that make and drop its database, and
 * returns the clock, a caller per access token (each call gets a context of its own, as each
 * request does) and `register`, all usable once the tests run.
 */
export function useProcedures(options: ProcedureOptions = {}) {
  const clock = new ManualClock(T0);
  let orm: MikroORM | undefined;
  const announcer = new Announcer(() => orm!.em.fork());
  beforeAll(async () => {
    orm = await openOrm(await createTestDatabase(), { migrate: true, poolSize: 5 });
  });
  afterAll(async () => {
    await orm?.close(true);
    orm = undefined;
  });
  if (options.resetClock) beforeEach(() => clock.set(T0));

  /** The context a request with this Authorization header and these headers would get. */
  function contextFor(authorization?: string, headers: Record<string, string> = {}): Context {
    if (!orm) throw new Error('the procedures are only there while the tests run (beforeAll to afterAll)');
    // The root entity manager, as a request's (src/http/app.ts).
    const em = orm.em;
    return createContextInner({
      em,
      clock,
      authenticate: (a) => authenticate(em, a, clock.now()),
      writes,
      announcer,
      headers: { ...headers, authorization },
      baseUrl: 'http://procedures.test',
      passwordHashCost: 1024,
      // Webhook URLs: public addresses only, names from a fixed table (no network here).
      webhooks: { allowPrivateUrls: false, resolve: testResolver() },
    });
  }

  /** The procedures as a client with this token (or none) calls them. */
  const caller = (token?: string, headers?: Record<string, string>): Caller => createCaller(() => contextFor(token, headers));

  let users = 0;
  /** Registers a fresh user; its id, username, token and a caller with that token. */
  async function register(username = `user${++users}_${randomBytes(3).toString('hex')}`) {
    const doc = await caller().users.register({ user: { username, password: 'correct horse' } });
    const token = doc.meta.token as string;
    return { id: doc.data.id as number, username, token, api: caller(token) };
  }

  return {
    clock,
    caller,
    register,
    contextFor,
    get orm(): MikroORM {
      if (!orm) throw new Error('the procedures are only there while the tests run');
      return orm;
    },
  };
}

/** The error envelope (status and errors) a call that must fail answers with on both doors. */
export async function procedureError(call: Promise<unknown>) {
  const error = await call.then(
    (value) => {
      throw new Error(`expected the call to fail, it answered ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  return toErrorResponse(error);
}

/** Asserts that a call fails with exactly one error, as `expectError` does for an HTTP answer. */
export async function expectProcedureError(call: Promise<unknown>, status: number, code: string, source?: Source) {
  const response = await procedureError(call);
  expect({ status: response.status, errors: response.errors }).toEqual({ status, errors: [errorShape(status, code, source)] });
}

/** The refusal a write function raised (src/writes/write-functions.ts `refusalSql`), if this error is one. */
export function refusalOf(error: unknown): Refusal | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (code === REFUSAL_STATE && typeof message === 'string') return JSON.parse(message.slice(message.indexOf('{'))) as Refusal;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
