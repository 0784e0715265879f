/**
 * The order test files are handed to the workers (vitest.config.ts).
 *
 * The `system` files spawn services and PostgreSQLs and are the longest; the `in-process`
 * ones are many and short. Each list is sorted longest first (by the last run's duration
 * when vitest has one, else by file size, as vitest's own sequencer does), and the system
 * files are spread evenly through the in-process ones: the longest starts at once, and the
 * workers rarely start several process-spawning files at the same moment on a small machine.
 *
 * With `--sequence.shuffle` the files run in an order drawn from `--sequence.seed` instead
 * (as vitest's random sequencer does), so an order-dependent file shows up.
 */
import { stat } from 'node:fs/promises';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { mulberry32 } from './prng.js';

/** Files spread among the others: those under test/system/. */
const SPREAD = /[\\/]test[\\/]system[\\/]/;

export class TieredSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { sequence } = this.ctx.config;
    if (sequence.shuffle) return shuffled(files, sequence.seed);
    const spread = await this.#longestFirst(files.filter((spec) => SPREAD.test(spec.moduleId)));
    const rest = await this.#longestFirst(files.filter((spec) => !SPREAD.test(spec.moduleId)));
    const order: TestSpecification[] = [];
    const every = spread.length ? (spread.length + rest.length) / spread.length : Infinity;
    for (let i = 0; spread.length || rest.length; i++) {
      order.push(((i % every < 1 && spread.length) || !rest.length ? spread.shift() : rest.shift())!);
    }
    return order;
  }

  /** By the last run's durations when every file has one that passed, else by file size. */
  async #longestFirst(list: TestSpecification[]): Promise<TestSpecification[]> {
    const results = list.map((spec) => this.ctx.cache.getTestSpecificationResult(spec));
    const weights = results.every((r) => r && !r.failed)
      ? results.map((r) => r!.duration)
      : await Promise.all(list.map(async (spec) => (await stat(spec.moduleId)).size));
    const weight = new Map(list.map((spec, i) => [spec, weights[i]!]));
    return [...list].sort((a, b) => weight.get(b)! - weight.get(a)! || compare(a.moduleId, b.moduleId));
  }
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
