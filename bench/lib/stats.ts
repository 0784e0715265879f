/** Quantiles of measured times (autocannon's rows use load.ts's nearest-rank percentiles instead). */

/** The value at index ⌊p × n⌋ of sorted values (p in [0, 1]), `empty` when there are none. */
export function quantile(sorted: readonly number[], p: number, empty = NaN): number {
  if (sorted.length === 0) return empty;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** A sorted copy, ascending. */
export const ascending = (values: readonly number[]) => [...values].sort((a, b) => a - b);
