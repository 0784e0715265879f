/**
 * One configuration for every fast-check property of the suite (a vitest setup file):
 *
 * - A failure names its seed and path ("seed: 123, path: "4:2""). Replay exactly that run
 *   with `FC_SEED=123 FC_PATH=4:2 npx vitest run test/<tier>/<file>.test.ts`.
 * - Properties run their fixed number of cases; a property interrupted by a time limit fails
 *   instead of passing with fewer runs.
 */
import fc from 'fast-check';

const seed = process.env.FC_SEED;
const path = process.env.FC_PATH;

fc.configureGlobal({
  ...(seed ? { seed: Number(seed) } : {}),
  ...(path ? { path } : {}),
  markInterruptAsFailure: true,
  verbose: 1,
});
