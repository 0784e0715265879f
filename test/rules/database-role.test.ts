/**
 * What a process makes of its database's answers (src/db/database-role.ts, API-CONTRACT.md
 * §17): the role from the probe, a failover from a timeline that rises, and the role from the
 * errors of 503 answers. The probe's statement is stubbed; the statement itself runs against
 * PostgreSQL in test/system/read-only-database.test.ts and test/system/failover.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DatabaseRoleWatch, PROBE_TIMEOUT_MS } from '../../src/db/database-role.js';

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
});
