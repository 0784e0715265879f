/** What every scenario shares: the checkout's root, numeric knobs from the environment, formatting. */
import path from 'node:path';

/** The checkout the bench runs from (the service is built and started there). */
export const ROOT = path.resolve(import.meta.dirname, '../..');

/** A numeric knob: the environment variable when set, else the default. */
export const num = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const log = (line: string) => console.log(line);
export const f0 = (n: number) => n.toFixed(0);
export const f1 = (n: number) => n.toFixed(1);

/** `2026-11-23 16:23`: a time as the reports' headings give it (UTC, to the minute). */
export const utcMinute = (at: Date) => at.toISOString().slice(0, 16).replace('T', ' ');
