/**
 * One run of a scenario: a fresh temp folder for its database and files, what to undo at the
 * end (children, clients, the database, the folder: the last registered first, also on
 * Ctrl-C), and the process's exit code (0, 1 on an error, 130 on Ctrl-C).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface Session {
  /** The scenario's name, as in its results files (`bench/results/<scenario>-….md`). */
  readonly scenario: string;
  /** A temp folder (mode 755: PostgreSQL, run as another user under root, must reach its data in it); removed at the end. */
  readonly dir: string;
  readonly startedAt: Date;
  /** Load average (1/5/15 min) when the run started. */
  readonly loadBefore: number[];
  /** Registers something to undo at the end; errors while undoing are ignored. */
  defer(undo: () => unknown): void;
}

export function runScenario(scenario: string, body: (session: Session) => Promise<void>): void {
  const undo: Array<() => unknown> = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const step of undo.reverse()) await Promise.resolve().then(step).catch(() => undefined);
    })());
  const run = async () => {
    const startedAt = new Date();
    const loadBefore = os.loadavg();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), `planning-bench-${scenario}-`));
    undo.push(() => fs.rm(dir, { recursive: true, force: true }));
    await fs.chmod(dir, 0o755);
    process.once('SIGINT', () => {
      void cleanup().finally(() => process.exit(130));
    });
    try {
      await body({ scenario, dir, startedAt, loadBefore, defer: (step) => undo.push(step) });
    } finally {
      await cleanup();
    }
  };
  run().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
