/**
 * The suite's fast-check configuration (test/helpers/fast-check-setup.ts) holds: a property
 * cut short by a time limit fails rather than passing with fewer runs, and a failure names
 * the seed and path that replay it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe('fast-check configuration', () => {
  it('an interrupted property fails', async () => {
    // A few quick runs, then runs that take a while: the time limit stops it after some runs.
    let runs = 0;
    const slowing = fc.asyncProperty(fc.nat(), () => new Promise<void>((resolve) => setTimeout(resolve, ++runs > 5 ? 20 : 0)));
    const details = await fc.check(slowing, { numRuns: 1_000, interruptAfterTimeLimit: 50 });
    expect(details.interrupted).toBe(true);
    expect(details.numRuns).toBeGreaterThan(0);
    expect(details.failed, 'an interrupted run must count as a failure').toBe(true);
  });

  it('a failure prints its seed and path, and they replay the same counterexample', () => {
    const property = fc.property(fc.integer(), (n) => n < 1_000);
    let message = '';
    try {
      fc.assert(property);
    } catch (error) {
      message = (error as Error).message;
    }
    const found = /seed: (-?\d+), path: "([^"]+)"/.exec(message);
    expect(found, message).not.toBeNull();
    const counterexample = /Counterexample: \[(-?\d+)\]/.exec(message)?.[1];
    const replay = fc.check(property, { seed: Number(found![1]), path: found![2], endOnFailure: true });
    expect(replay.failed).toBe(true);
    expect(String(replay.counterexample?.[0])).toBe(counterexample);
  });
});
