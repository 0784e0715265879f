/**
 * Targets compared with each other take turns, a slice each per round, so that all see the
 * same machine and their ratio holds on a shared host even when the absolute figures move.
 * `rotate` changes which goes first every round (A B C, B C A, C A B…); `reverse` plays the
 * order forward, then backward (A B C, C B A…).
 */
export async function takeTurns<T>(
  items: readonly T[],
  rounds: number,
  order: 'rotate' | 'reverse',
  run: (item: T, index: number, round: number) => Promise<void>,
): Promise<void> {
  const n = items.length;
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < n; k++) {
      const i = order === 'rotate' ? (k + round) % n : round % 2 === 0 ? k : n - 1 - k;
      await run(items[i]!, i, round);
    }
  }
}
