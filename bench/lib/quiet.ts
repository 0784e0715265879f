/**
 * The machine is shared (other people's test runs): before a measured stretch, wait until
 * processes outside the bench use < 10 % of it over a second, for at most 45 s a stretch and
 * `budgetSeconds` in all. Each row still reports what others used while it ran.
 */
import { f0, log, sleep } from './env.js';
import { benchCpu, machineCpu } from './proc.js';

export interface QuietWait {
  (): Promise<void>;
  /** Time spent waiting so far, ms. */
  waitedMs(): number;
}

/** `ourPids`: the bench's processes (see benchCpu), whose CPU does not count as others'. */
export function quietWait(ourPids: number[], budgetSeconds: number): QuietWait {
  let budgetMs = budgetSeconds * 1000;
  let waitedMs = 0;
  const wait = async () => {
    const began = Date.now();
    for (;;) {
      const c0 = machineCpu();
      const o0 = benchCpu(ourPids);
      await sleep(1_000);
      const c1 = machineCpu();
      const other = ((c1.procs - c0.procs - (benchCpu(ourPids) - o0)) / Math.max(1, c1.total - c0.total)) * 100;
      if (other < 10 || Date.now() - began >= Math.min(budgetMs, 45_000)) break;
      if (Date.now() - began < 1_500) log(`  waiting for other processes to calm down (${f0(other)} % of the machine)`);
      await sleep(2_000);
    }
    const waited = Math.max(0, Date.now() - began - 1_000);
    waitedMs += waited;
    budgetMs = Math.max(0, budgetMs - waited);
  };
  return Object.assign(wait, { waitedMs: () => waitedMs });
}
