/**
 * One user's turns (src/writes/turns.ts): half the pool's connections, one to five, so a
 * user's burst leaves the other half of any pool to everyone else; and a user's writes past
 * their turns wait, first come first served, each turn passing on exactly once.
 */
import { describe, expect, it } from 'vitest';
import { turns, writersFor, WRITERS_PER_USER } from '../../src/writes/turns.js';

describe('turns', () => {
  it.each([
    [1, 1], [2, 1], [3, 1], [4, 2], [5, 2], [9, 4], [10, 5], [11, 5], [20, 5], [100, 5],
  ])('a pool of %i gives a user %i turns', (pool, writers) => {
    expect(writersFor(pool)).toBe(writers);
    expect(writersFor(pool)).toBeLessThanOrEqual(Math.max(1, pool / 2));
    expect(writersFor(pool)).toBeLessThanOrEqual(WRITERS_PER_USER);
  });

  it('runs at most `writers` of a user at once, the others in the order they came; other users are not held', async () => {
    const user = 9_000_001;
    const order: number[] = [];
    const releases: Array<() => void> = [];
    const waiting = Array.from({ length: 5 }, (_, i) =>
      turns.acquire(user, 2).then((release) => {
        order.push(i);
        releases.push(release);
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([0, 1]);
    // Another user has turns of its own.
    const other = await turns.acquire(9_000_002, 2);
    other();
    releases[0]!();
    releases[0]!(); // a second call gives nothing back twice
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([0, 1, 2]);
    for (let i = 1; i < 5; i++) {
      releases[i]!();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(waiting);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });
});
