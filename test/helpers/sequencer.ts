/**
 * The order test files are handed to the workers (vitest.config.ts).
 *
 * A worker that shares its modules between files (isolate: false) is kept for the next file
 * only when that file, first in the queue, is of the same project; otherwise it is stopped
 * and a new one loads src/ and its libraries again (a second or two of CPU). So the files of
 * a project are handed out together: first the few isolated ones (a fresh worker each
 * anyway), then the main project, then the pooled tier; the failover tier (one file, the
 * longest of a run) is handed out among the main project's last files (FAILOVER_PROJECT).
 * Interleaved, a run started some 60 workers instead of 8.
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

/**
 * Milliseconds the files over 4 s took in one run of the whole suite on a quiet 2-core
 * machine (3 workers). docs-browser.test.ts is skipped at once where Chromium is missing (CI
 * installs it).
 */
const MEASURED_MS: Record<string, number> = {
  'system/webhooks-deployment.test.ts': 55_100,
  'system/haproxy-deployment.test.ts': 48_600,
  'hostile/bodies.test.ts': 43_900,
  'hostile/batch.test.ts': 41_300,
  'system/embedded-postgres.test.ts': 40_500,
  'system/memory.test.ts': 38_700,
  'http/write-contention.test.ts': 38_300,
  'system/docs-browser.test.ts': 35_400,
  'system/stream-limits-instances.test.ts': 28_400,
  'http/tasks-list-queries.test.ts': 27_600,
  'hostile/webhooks.test.ts': 24_100,
  'http/projects-list-queries.test.ts': 22_400,
  'http/contract.test.ts': 20_100,
  'system/pooled-service.test.ts': 19_400,
  'system/idempotency.test.ts': 17_400,
  'system/change-log.test.ts': 16_700,
  'system/webhooks-faults.test.ts': 16_300,
  'hostile/tokens.test.ts': 16_100,
  'system/pooled-faults.test.ts': 15_500,
  'http/batch-races.test.ts': 14_800,
  'rules/openapi-lint.test.ts': 14_300,
  'system/stream-limits-outage.test.ts': 13_900,
  'system/service-lifecycle.test.ts': 12_900,
  'system/private-folder.test.ts': 12_600,
  'http/tasks-counts.test.ts': 12_600,
  'procedures/projects-state.test.ts': 11_800,
  'system/export-memory.test.ts': 11_600,
  'system/cluster.test.ts': 11_600,
  'http/projects-create-and-edit.test.ts': 11_400,
  'system/webhooks-delivery.test.ts': 11_300,
  'system/metrics.test.ts': 11_300,
  'system/readme.test.ts': 11_100,
  'http/webhooks.test.ts': 10_800,
  'http/access.test.ts': 10_800,
  'system/pooled-instances.test.ts': 10_300,
  'system/graceful-stop.test.ts': 10_000,
  'hostile/list-queries.test.ts': 9_500,
  'system/webhooks-edges.test.ts': 9_400,
  'system/operator-logs.test.ts': 9_300,
  'system/crash.test.ts': 9_300,
  'system/pooler-refusals.test.ts': 9_100,
  'rules/tasks-state-sql.test.ts': 9_100,
  'system/read-only-database.test.ts': 9_000,
  'http/change-log.test.ts': 8_900,
  'http/account.test.ts': 8_200,
  'http/time-zones.test.ts': 8_100,
  'http/tasks-concurrency.test.ts': 7_900,
  'http/tasks-listing-and-order.test.ts': 7_400,
  'system/pool-size.test.ts': 7_300,
  'hostile/batch-values.test.ts': 7_300,
  'system/change-log-outage.test.ts': 7_200,
  'http/query-count.test.ts': 7_200,
  'http/tokens.test.ts': 7_000,
  'http/projects-and-their-tasks.test.ts': 7_000,
  'system/http-limits.test.ts': 6_800,
  'system/outage.test.ts': 6_700,
  'procedures/read-sql.test.ts': 6_600,
  'rules/citus-distribute.test.ts': 6_500,
  'http/metrics.test.ts': 6_400,
  'system/webhooks-outage.test.ts': 6_300,
  'http/batch-property.test.ts': 6_200,
  'http/parity.test.ts': 5_900,
  'hostile/json.test.ts': 5_600,
  'hostile/batch-trpc.test.ts': 5_400,
  'http/webhooks-idempotency.test.ts': 4_900,
  'http/tasks-create-and-edit.test.ts': 4_900,
  'http/idempotency-property.test.ts': 4_800,
  'hostile/seams.test.ts': 4_800,
  'http/token-scopes.test.ts': 4_700,
  'procedures/write-functions.test.ts': 4_400,
  'http/webhooks-actions.test.ts': 4_400,
  'hostile/ids-and-queries.test.ts': 4_300,
  'system/stream-leases.test.ts': 4_200,
  'http/change-log-delivery.test.ts': 4_100,
  'http/projects-access.test.ts': 4_000,
  'http/http-errors.test.ts': 4_000,
};
/** A file not measured above takes less than this. */
const UNMEASURED_MS = 4_000;

/**
 * The failover tier (vitest.config.ts), handed out after the main project's system files and
 * before its shortest other files (BESIDE_FAILOVER_MS of them) and the pooled tier: the
 * longest file of a run, it then runs beside files that spawn no process and do not time
 * themselves, which it slows (its deployment takes more than a core, at a higher priority),
 * rather than beside the first files, the longest system ones, which measure time
 * themselves (memory.test.ts, embedded-postgres.test.ts took three to four times as long
 * beside it).
 */
const FAILOVER_PROJECT = 'failover';
/**
 * Estimated milliseconds of the main project's shortest files (not under test/system/)
 * handed out after the failover tier: with the pooled tier (about a minute), enough to keep
 * the other two workers busy through most of the tier's minute and a half, which it would
 * otherwise end alone.
 */
const BESIDE_FAILOVER_MS = 60_000;

/** The project that runs the pooled tier (vitest.config.ts), handed out last. */
const POOLED_PROJECT = 'pooled';

/** Files spread among the others: those under test/system/. */
const SPREAD = /[\\/]test[\\/]system[\\/]/;

export class TieredSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { sequence } = this.ctx.config;
    if (sequence.shuffle) return shuffled(files, sequence.seed);
    const failover = files.filter((spec) => spec.project.name === FAILOVER_PROJECT);
    const own = files.filter((spec) => spec.project.config.isolate && !failover.includes(spec));
    const pooled = files.filter((spec) => !spec.project.config.isolate && spec.project.name === POOLED_PROJECT);
    const shared = files.filter((spec) => !failover.includes(spec) && !own.includes(spec) && !pooled.includes(spec));
    const spread = await this.#longestFirst(shared.filter((spec) => SPREAD.test(spec.moduleId)));
    const others = shared.filter((spec) => !SPREAD.test(spec.moduleId));
    const rest = await this.#longestFirst(others);
    // The shortest of the others (none spawns a process) go with the failover tier.
    const beside: TestSpecification[] = [];
    if (failover.length > 0) {
      const weight = await this.#weights(others);
      for (let ms = 0; rest.length > 0 && ms < BESIDE_FAILOVER_MS; ms += weight.get(beside[0]!)!) beside.unshift(rest.pop()!);
    }
    const order: TestSpecification[] = await this.#longestFirst(own);
    const every = spread.length ? (spread.length + rest.length) / spread.length : Infinity;
    for (let i = 0; spread.length || rest.length; i++) {
      order.push(((i % every < 1 && spread.length) || !rest.length ? spread.shift() : rest.shift())!);
    }
    return [...order, ...failover, ...beside, ...(await this.#longestFirst(pooled))];
  }

  /** By the last run's durations when every file has one that passed, else as measured above. */
  async #weights(list: TestSpecification[]): Promise<Map<TestSpecification, number>> {
    const results = list.map((spec) => this.ctx.cache.getTestSpecificationResult(spec));
    const weights = results.every((r) => r && !r.failed) ? results.map((r) => r!.duration) : await Promise.all(list.map(estimate));
    return new Map(list.map((spec, i) => [spec, weights[i]!]));
  }

  async #longestFirst(list: TestSpecification[]): Promise<TestSpecification[]> {
    const weight = await this.#weights(list);
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
