/**
 * The order test files are handed to the workers (vitest.config.ts).
 *
 * A worker that shares its modules between files (isolate: false) is kept for the next file
 * only when that file, first in the queue, is of the same project; otherwise it is stopped
 * and a new one loads src/ and its libraries again (a second or two of CPU). So the files of
 * a project are handed out together: first the few isolated ones (a fresh worker each
 * anyway), then the main project, then the pooled tier. Interleaved, a run started some 60
 * workers instead of 7.
 *
 * Within the main project, the files under test/system/ spawn services and PostgreSQLs and
 * are among the longest; the others are many and mostly short. Each list is sorted longest
 * first, and the system files are spread evenly through the others: the longest start at
 * once, and the workers rarely start several process-spawning files at the same moment on a
 * small machine. "Longest" is the last run's duration when vitest has one for every file;
 * without (a fresh clone, as in CI) it is the duration measured below for the slowest files,
 * and the file's size for the rest, which are short.
 *
 * With `--sequence.shuffle` the files run in an order drawn from `--sequence.seed` instead
 * (as vitest's random sequencer does), so an order-dependent file shows up.
 */
import { stat } from 'node:fs/promises';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { mulberry32 } from './prng.js';

/** Milliseconds the slowest files took in runs on a 2-core machine (3 workers). */
const MEASURED_MS: Record<string, number> = {
  'system/embedded-postgres.test.ts': 22_500,
  // With Chromium installed (CI installs it); without, it is skipped at once.
  'system/docs-browser.test.ts': 20_000,
  'hostile/bodies.test.ts': 17_300,
  'system/memory.test.ts': 13_400,
  'system/operator-logs.test.ts': 9_000,
  'http/write-contention.test.ts': 8_600,
  'system/idempotency.test.ts': 7_700,
  'system/service-lifecycle.test.ts': 7_200,
  'http/access.test.ts': 7_100,
  'system/change-log.test.ts': 7_000,
  'system/private-folder.test.ts': 6_300,
  'system/crash.test.ts': 5_100,
  'http/idempotency-property.test.ts': 5_000,
  'system/metrics.test.ts': 4_700,
  // Not measured alone: a tenth of what each took in a run on a machine shared with other
  // runs (load above 15 on 2 cores), where the whole run took ten times as long as alone.
  // Enough to start them among the first: estimated by their size they were handed out among
  // the short files, and a long file started late ends a run alone.
  'system/webhooks-deployment.test.ts': 18_700,
  'system/haproxy-deployment.test.ts': 15_700,
  'http/tasks-list-queries.test.ts': 15_800,
  'http/projects-list-queries.test.ts': 15_700,
  'rules/openapi-lint.test.ts': 14_100,
  'hostile/list-queries.test.ts': 13_900,
  'system/pooled-faults.test.ts': 12_000,
  'http/contract.test.ts': 10_700,
  'system/pooled-service.test.ts': 9_500,
  'http/tasks-counts.test.ts': 9_300,
  'http/batch-races.test.ts': 9_100,
  'hostile/ids-and-queries.test.ts': 8_900,
  'http/tasks-listing-and-order.test.ts': 8_700,
  'http/time-zones.test.ts': 8_600,
  'hostile/json.test.ts': 8_300,
  'system/pooled-instances.test.ts': 8_000,
  'http/batch-property.test.ts': 7_900,
  'hostile/trpc-framing.test.ts': 7_400,
  'system/pool-size.test.ts': 7_300,
  'system/change-log-outage.test.ts': 7_200,
};
/** A file not measured above takes less than this. */
const UNMEASURED_MS = 4_000;

/** The project that runs the pooled tier (vitest.config.ts), handed out last. */
const POOLED_PROJECT = 'pooled';

/** Files spread among the others: those under test/system/. */
const SPREAD = /[\\/]test[\\/]system[\\/]/;

export class TieredSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { sequence } = this.ctx.config;
    if (sequence.shuffle) return shuffled(files, sequence.seed);
    const own = files.filter((spec) => spec.project.config.isolate);
    const pooled = files.filter((spec) => !spec.project.config.isolate && spec.project.name === POOLED_PROJECT);
    const shared = files.filter((spec) => !own.includes(spec) && !pooled.includes(spec));
    const spread = await this.#longestFirst(shared.filter((spec) => SPREAD.test(spec.moduleId)));
    const rest = await this.#longestFirst(shared.filter((spec) => !SPREAD.test(spec.moduleId)));
    const order: TestSpecification[] = await this.#longestFirst(own);
    const every = spread.length ? (spread.length + rest.length) / spread.length : Infinity;
    for (let i = 0; spread.length || rest.length; i++) {
      order.push(((i % every < 1 && spread.length) || !rest.length ? spread.shift() : rest.shift())!);
    }
    return [...order, ...(await this.#longestFirst(pooled))];
  }

  /** By the last run's durations when every file has one that passed, else as measured above. */
  async #longestFirst(list: TestSpecification[]): Promise<TestSpecification[]> {
    const results = list.map((spec) => this.ctx.cache.getTestSpecificationResult(spec));
    const weights = results.every((r) => r && !r.failed) ? results.map((r) => r!.duration) : await Promise.all(list.map(estimate));
    const weight = new Map(list.map((spec, i) => [spec, weights[i]!]));
    return [...list].sort((a, b) => weight.get(b)! - weight.get(a)! || compare(a.moduleId, b.moduleId));
  }
}

/** The measured duration of a slow file; for another, a share of UNMEASURED_MS by its size. */
async function estimate(spec: TestSpecification): Promise<number> {
  const tierAndName = spec.moduleId.split(/[\\/]test[\\/]/).at(-1)!.replaceAll('\\', '/');
  const measured = MEASURED_MS[tierAndName];
  if (measured !== undefined) return measured;
  const { size } = await stat(spec.moduleId);
  return Math.min(size / 40_000, 1) * UNMEASURED_MS;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The files in an order drawn from `seed` alone (not from the glob's order). */
function shuffled(files: TestSpecification[], seed: number): TestSpecification[] {
  const list = [...files].sort((a, b) => compare(a.project.name, b.project.name) || compare(a.moduleId, b.moduleId));
  const random = mulberry32(seed);
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
  return list;
}
