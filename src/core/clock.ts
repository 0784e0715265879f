/**
 * Time comes from a Clock so that "today", "after today", "two weeks ago" and token expiry
 * are testable without sleeping. All domain times are whole seconds (API-CONTRACT.md §1).
 * What "today" is, in the user's time zone, is src/core/user-day.ts.
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

export function toSeconds(date: Date | null | undefined): number {
  return date ? Math.floor(date.getTime() / 1000) : 0;
}

export function fromSeconds(seconds: number): Date {
  return new Date(seconds * 1000);
}
