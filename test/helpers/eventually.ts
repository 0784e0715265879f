/**
 * The one way the tests wait for something to happen: a condition checked again and again,
 * never a sleep of a fixed length. A test that must show that something does NOT happen
 * for a while waits on a clock instead, and says why where it does.
 */
/** What a truthy check gives: the value, without the falsy ones it may also be. */
export type Truthy<T> = Exclude<T, false | 0 | 0n | '' | null | undefined>;

export interface EventuallyOptions {
  /** Milliseconds before it gives up (5,000 unless given). */
  timeout?: number;
  /** Milliseconds between two checks (20 unless given; 0 checks again on the next turn). */
  interval?: number;
  /** What is waited for, for the failure's message. */
  message?: string;
}

/**
 * Checks `condition` until it answers a truthy value, and resolves with that value. A check
 * that throws fails the wait at once (catch inside the condition what may fail for a while).
 * After `timeout` ms it fails, saying what it waited for and what the last check gave.
 */
export async function eventually<T>(condition: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Truthy<T>> {
  const { timeout = 5_000, interval = 20 } = options;
  const deadline = performance.now() + timeout;
  for (;;) {
    const value = await condition();
    if (value) return value as Truthy<T>;
    const left = deadline - performance.now();
    if (left <= 0) {
      const what = options.message ?? `the condition ${condition.toString().slice(0, 200)}`;
      throw new Error(`${what}: not so within ${timeout} ms (the last check gave ${JSON.stringify(value)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(interval, left)));
  }
}

/** The promise's value, or a failure saying what did not happen once `ms` have passed. */
export async function withinDeadline<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
