/**
 * Failures that are not the service's bugs and pass by themselves: a statement timeout
 * (57014), a full disk (53100), too many clients (53300), and no file descriptor left
 * (EMFILE). Each is 503 `unavailable` with Retry-After on both doors, never a 500.
 * A full disk is 503, not 507: clients need one retry rule, and openapi.json declares 503
 * (with Retry-After) on every operation, which is checked here too.
 *
 * PostgreSQL raises the errors itself: a trigger on the test's own database fails inserts
 * of projects whose name asks for a SQLSTATE, so each one travels through the real driver,
 * ORM and both doors.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toErrorResponse } from '../../src/core/failures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

const lines: Array<Record<string, any>> = [];
const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
let app: TestApp;
let token: string;

async function sql(query: string): Promise<void> {
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  try {
    await client.query(query);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  app = await startTestApp({ logger });
  ({ token } = await app.register());
  await sql(`
    create function fail_on_demand() returns trigger language plpgsql as $$
    begin
      if new.name like 'fail\\_%' then
        raise exception 'injected failure' using errcode = substr(new.name, 6, 5);
      end if;
      return new;
    end $$;
    create trigger fail_on_demand before insert on projects for each row execute function fail_on_demand();
  `);
});
afterAll(async () => {
  await app?.close();
});

const CASES = [
  ['57014', 'a statement timeout'],
  ['53100', 'a full disk'],
  ['53300', 'too many clients'],
] as const;

describe('failures that are not ours', () => {
  it.each(CASES)('%s (%s) is 503 unavailable with Retry-After on REST', async (sqlState) => {
    const res = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: `fail_${sqlState}` } } });
    expect(res.status, res.text).toBe(503);
    expect(res.body).toEqual({
      errors: [{ status: '503', code: 'unavailable', title: 'Service unavailable', detail: expect.any(String) }],
    });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it.each(CASES)('%s (%s) is 503 unavailable on /trpc', async (sqlState) => {
    const error = await app
      .trpc(token)
      .projects.create.mutate({ project: { name: `fail_${sqlState}` } })
      .then(() => undefined, (e: any) => e);
    expect(error, 'the call succeeded').toBeDefined();
    expect(error.data?.httpStatus).toBe(503);
    expect(error.data?.code).toBe('unavailable');
  });

  it('a statement that ran out of time says so, not that the database cannot be reached', async () => {
    const timedOut = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'fail_57014' } } });
    expect(timedOut.body.errors[0].detail).toBe('The database did not finish this request in time; try again shortly.');
    const full = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'fail_53100' } } });
    expect(full.body.errors[0].detail).toBe('The database cannot be reached right now; try again shortly.');
  });

  it('a connect that finds no file descriptor left (EMFILE) is 503 too', () => {
    // What pg rejects with when the process has no descriptor for a new connection.
    const emfile = Object.assign(new Error('connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)'), {
      code: 'EMFILE',
      errno: -24,
      syscall: 'connect',
    });
    const response = toErrorResponse(emfile);
    expect(response.status).toBe(503);
    expect(response.errors[0]!.code).toBe('unavailable');
    expect(response.retryAfter).toBeGreaterThan(0);
  });

  it('openapi.json declares that 503 with Retry-After for project creation', () => {
    const doc = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));
    const declared = doc.paths['/api/users/me/projects'].post.responses['503'];
    expect(declared, 'no 503 declared').toBeDefined();
    expect(Object.keys(declared.headers ?? {})).toContain('Retry-After');
  });

  it('logs them at warn without a stack, sampled, never at error', async () => {
    const before = lines.length;
    for (let i = 0; i < 5; i++) {
      const res = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'fail_53100' } } });
      expect(res.status).toBe(503);
    }
    const written = lines.slice(before).filter((l) => l.msg !== 'request');
    expect(written.filter((l) => l.level >= 50), JSON.stringify(written)).toEqual([]);
    // Five in a row within one sampling window: at most one line says so.
    const warnings = written.filter((l) => l.level === 40);
    expect(warnings.length, JSON.stringify(written)).toBeLessThanOrEqual(1);
    for (const w of lines.filter((l) => l.level === 40)) {
      expect(JSON.stringify(w)).not.toMatch(/"stack"/);
      expect(w.code).toMatch(/^(57014|53100|53300)$/);
    }
  });
});
