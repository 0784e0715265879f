/** The instants the tests set their clocks to. T0 is 2026-06-15T12:00:00Z, a Monday. */

/** 2026-06-15T12:00:00Z, a Monday (milliseconds). */
export const T0 = Date.UTC(2026, 5, 15, 12, 0, 0);
export const DAY = 86_400;
export const HOUR = 3600;
export const seconds = (ms: number) => Math.floor(ms / 1000);
/** T0 in Unix seconds. */
export const T0S = seconds(T0);
/** 2026-06-16T00:00:00Z: the first instant that is "after today" at T0. */
export const NEXT_MIDNIGHT = T0S + 12 * HOUR;
/** 2026-06-15T23:59:59Z: the last second of "today" at T0. */
export const END_OF_TODAY = NEXT_MIDNIGHT - 1;
/** A project due date comfortably after today. */
export const DUE = NEXT_MIDNIGHT + 7 * DAY;
