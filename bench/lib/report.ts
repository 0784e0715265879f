/**
 * Every run's Markdown report goes to bench/results/<scenario>-<UTC start>.md (the start to
 * the minute, `2026-11-23T16-23Z`; to the second if that file exists), and also to a file the
 * scenario's knob names (BENCH_OUT, PROFILE_OUT), written or appended to.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { log, ROOT } from './env.js';
import type { Session } from './session.js';

export const RESULTS_DIR = path.join(ROOT, 'bench', 'results');

/** Writes the report; returns its path relative to the checkout. */
export function writeResult(session: Session, markdown: string, also?: { file?: string; append?: boolean }): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = session.startedAt.toISOString().replace(/:/g, '-');
  const text = markdown.endsWith('\n') ? markdown : markdown + '\n';
  let file = path.join(RESULTS_DIR, `${session.scenario}-${stamp.slice(0, 16)}Z.md`);
  try {
    writeFileSync(file, text, { flag: 'wx' });
  } catch {
    file = path.join(RESULTS_DIR, `${session.scenario}-${stamp.slice(0, 19)}Z.md`);
    writeFileSync(file, text);
  }
  if (also?.file) {
    if (also.append) appendFileSync(also.file, `\n${text}`);
    else writeFileSync(also.file, text);
  }
  const relative = path.relative(ROOT, file);
  log(`\nreport written to ${relative}`);
  return relative;
}
