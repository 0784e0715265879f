/**
 * What a process makes of its database's answers (src/db/database-role.ts, API-CONTRACT.md
 * §17): the role from the probe, a failover from a timeline that rises, and the role from the
 * errors of 503 answers. The probe's statement is stubbed; the statement itself runs against
 * PostgreSQL in test/system/read-only-database.test.ts and test/system/failover.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DatabaseRoleWatch, PROBE_TIMEOUT_MS } from '../../src/db/database-role.js';
import { isConnectionUnfit, isReadOnlyDatabase, isServerGone, toErrorResponse } from '../../src/core/failures.js';

type Answer = { read_only: boolean; wal_file: string | null } | Error | 'hang';

function watchOf(answers: Answer[]) {
  const seen: string[] = [];
  const watch = new DatabaseRoleWatch(async () => {
    const next = answers.shift();
    if (next === undefined) throw new Error('no answer left');
    if (next === 'hang') return new Promise(() => undefined);
    if (next instanceof Error) throw next;
    return [next];
  });
  watch.observe({ role: (r) => seen.push(r), failover: () => seen.push('failover'), unavailable: () => seen.push('503') });
  return { watch, seen };
}

const primary = (timeline: number) => ({ read_only: false, wal_file: `${timeline.toString(16).toUpperCase().padStart(8, '0')}000000000000000A` });

describe('the database role a process sees', () => {
  it('counts a failover each time the timeline of the primary rises, not when the same primary comes back', async () => {
    const { watch, seen } = watchOf([primary(1), new Error('Connection terminated unexpectedly'), primary(1), primary(2), { read_only: true, wal_file: null }, primary(4)]);
    expect(watch.state).toEqual({ role: 'unknown', failovers: 0, unavailable: 0 });
    expect(await watch.probe()).toBe('primary');
    expect(await watch.probe()).toBe('unreachable');
    expect(await watch.probe()).toBe('primary');
    expect(watch.state.failovers).toBe(0);
    expect(await watch.probe()).toBe('primary');
    expect(watch.state.failovers).toBe(1);
    expect(await watch.probe()).toBe('read-only');
    expect(await watch.probe()).toBe('primary');
    expect(watch.state).toEqual({ role: 'primary', failovers: 2, unavailable: 0 });
    expect(seen).toEqual(['primary', 'unreachable', 'primary', 'failover', 'read-only', 'failover', 'primary']);
  });

  it('takes a probe with no answer within its bound as unreachable', async () => {
    const { watch } = watchOf(['hang']);
    const started = performance.now();
    expect(await watch.probe()).toBe('unreachable');
    expect(performance.now() - started).toBeLessThan(PROBE_TIMEOUT_MS + 500);
  });

  it('takes the role from the 503s it is told of, and counts them all', async () => {
    const { watch, seen } = watchOf([]);
    watch.stop(); // no probe after them here
    watch.noteUnavailable('read-only');
    watch.noteUnavailable('unreachable');
    watch.noteUnavailable(undefined); // a 503 that was not the database's: counted, role kept
    expect(watch.state).toEqual({ role: 'unreachable', failovers: 0, unavailable: 3 });
    expect(seen).toEqual(['503', 'read-only', '503', 'unreachable', '503']);
  });

  it('takes a 25006 from the probe itself as read-only', async () => {
    const { watch } = watchOf([Object.assign(new Error('cannot execute in a read-only transaction'), { code: '25006' })]);
    expect(await watch.probe()).toBe('read-only');
  });

  it('holds an outage from a request that found the server gone until a probe gets an answer', async () => {
    const gone = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const { watch } = watchOf([gone, gone, primary(1)]);
    watch.noteUnavailable('unreachable', false);
    expect(watch.outage).toBe(false); // slow is not gone
    watch.noteUnavailable('unreachable', true);
    expect(watch.outage).toBe(true);
    // Probes every OUTAGE_PROBE_MS: two fail, the third answers.
    const started = performance.now();
    while (watch.outage && performance.now() - started < 5_000) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(watch.outage).toBe(false);
    expect(watch.state.role).toBe('primary');
    watch.stop();
  });

  it('holds an outage from a request that could not reach the server when a probe just got no answer either', async () => {
    const gone = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const { watch } = watchOf([gone, primary(1)]);
    watch.noteUnavailable('unreachable', false);
    expect(watch.outage).toBe(false); // one timeout alone: a busy pool as well as a gone server
    expect(await watch.probe()).toBe('unreachable');
    watch.noteUnavailable('unreachable', false);
    expect(watch.outage).toBe(true);
    const started = performance.now();
    while (watch.outage && performance.now() - started < 5_000) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(watch.outage).toBe(false);
    watch.stop();
  });
});

describe('what a failover says, as the service reads it', () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'ERROR' });
  it.each([
    ['25006', 'cannot execute INSERT in a read-only transaction'],
    ['0A000', 'cannot access temporary or unlogged relations during recovery'],
    ['55000', 'recovery is in progress'],
  ])('%s (%s), a server in recovery or read-only, is 503, read-only, and its connection is not reused', (code, message) => {
    const error = pgError(code, message);
    expect(toErrorResponse(error).status).toBe(503);
    expect(toErrorResponse(error).retryAfter).toBeGreaterThan(0);
    expect(isReadOnlyDatabase(error)).toBe(true);
    expect(isConnectionUnfit(error)).toBe(true);
    expect(isServerGone(error)).toBe(false);
  });

  it.each([
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection because of crash of another server process'],
    ['ECONNRESET', 'read ECONNRESET'],
  ])('%s (%s), a server gone, is 503 and not reused', (code, message) => {
    const error = pgError(code, message);
    expect(toErrorResponse(error).status).toBe(503);
    expect(isConnectionUnfit(error)).toBe(true);
    expect(isServerGone(error)).toBe(true);
  });

  it('keeps the connection of a statement timeout or of another 0A000', () => {
    expect(isConnectionUnfit(pgError('57014', 'canceling statement due to statement timeout'))).toBe(false);
    expect(toErrorResponse(pgError('0A000', 'cannot do that')).status).toBe(500);
  });
});
