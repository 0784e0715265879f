/** Reading the Prometheus exposition of GET /metrics in tests. */
import { expect } from 'vitest';
import { eventually } from './eventually.js';

/** One sample of the exposition: `name{labels} value`. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(match[3]);
  }
  return undefined;
}

export async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/**
 * Scrapes until `check` holds (a stream's close reaches the server a little after the
 * client's), and answers the last scrape either way: the caller's assertion on it says what
 * differs.
 */
export async function scrapeUntil(url: string, check: (text: string) => boolean): Promise<string> {
  let text = '';
  await eventually(async () => check((text = await scrape(url))), { timeout: 5_000, interval: 25 }).catch(() => undefined);
  return text;
}

/** The labels of a task created over REST. */
export const CREATED = { operation: 'tasks.create', door: 'rest', method: 'POST', status: '201' };
