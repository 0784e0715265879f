/**
 * Time comes from a Clock so that "today", "after today", "two weeks ago" and token expiry
 * are testable without sleeping. All domain times are whole seconds (API-CONTRACT.md §1).
 */
export interface Clock {
  /** The current time, truncated to a whole second. */
  now(): Date;
}

export const systemClock: Clock = {
  now: () => new Date(Math.floor(Date.now() / 1000) * 1000),
};

/** A clock that stands still until moved; for tests. */
export class ManualClock implements Clock {
  #ms: number;
  constructor(start: Date | number = Date.now()) {
    this.#ms = Math.floor(Number(start) / 1000) * 1000;
  }
  now(): Date {
    return new Date(this.#ms);
  }
  set(to: Date | number): void {
    this.#ms = Math.floor(Number(to) / 1000) * 1000;
  }
  advance(seconds: number): void {
    this.#ms += seconds * 1000;
  }
}

const DAY_MS = 86_400_000;

/** Midnight UTC starting the day of `at`. */
export function startOfUtcDay(at: Date): Date {
  return new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
}

/** "After today" means at or after the next UTC midnight. */
export function startOfTomorrow(at: Date): Date {
  return new Date(startOfUtcDay(at).getTime() + DAY_MS);
}

/** Last second of the current UTC day (the inclusive end of "today"). */
export function endOfToday(at: Date): Date {
  return new Date(startOfTomorrow(at).getTime() - 1000);
}

export function daysBefore(at: Date, days: number): Date {
  return new Date(at.getTime() - days * DAY_MS);
}

export function toSeconds(date: Date | null | undefined): number {
  return date ? Math.floor(date.getTime() / 1000) : 0;
}

export function fromSeconds(seconds: number): Date {
  return new Date(seconds * 1000);
}
