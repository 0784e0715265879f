/**
 * The direction of src/ (.dependency-cruiser.mjs): no import runs from a layer to one above
 * it, none runs sideways between siblings, no circle forms, every file has a layer. The same
 * rules run on small trees that break each of them, so the check is known to be able to fail.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import config from '../../.dependency-cruiser.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');

async function violationsIn(baseDir: string): Promise<string[]> {
  const { output } = await cruise(
    ['src'],
    { ...config.options, baseDir, validate: true, ruleSet: { forbidden: config.forbidden } },
    {},
    { tsConfig: extractTSConfig(path.join(ROOT, 'tsconfig.json')) },
  );
  const result = output as ICruiseResult;
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
}

describe('the direction of src/', () => {
  it('has no import against the direction, no circle and no file outside a layer', async () => {
    const violations = await violationsIn(ROOT);
    expect(violations).toEqual([]);
  });

  it('cruises every file of src/', async () => {
    const { output } = await cruise(['src'], { ...config.options, baseDir: ROOT }, {}, { tsConfig: extractTSConfig(path.join(ROOT, 'tsconfig.json')) });
    const modules = (output as ICruiseResult).modules.map((m) => m.source);
    expect(modules).toContain('src/writes/user-write.ts');
    expect(modules).toContain('src/main.ts');
    // Imports resolve to the TypeScript files (written with .js, as NodeNext wants).
    const userWrite = (output as ICruiseResult).modules.find((m) => m.source === 'src/writes/user-write.ts')!;
    expect(userWrite.dependencies.map((d) => d.resolved)).toContain('src/writes/idempotency.ts');
  });

  const FIXTURES = path.join(ROOT, 'test/fixtures/direction');

  it('refuses a lower layer importing a higher one', async () => {
    expect(await violationsIn(path.join(FIXTURES, 'upward'))).toEqual(['core-imports-no-layer-above: src/core/clock.ts -> src/tasks/task.ts']);
  });

  it('refuses an import circle inside one folder', async () => {
    const violations = await violationsIn(path.join(FIXTURES, 'circle'));
    expect(violations).toEqual(['no-circular: src/tasks/a.ts -> src/tasks/b.ts']);
  });

  it('refuses a file that belongs to no layer', async () => {
    expect(await violationsIn(path.join(FIXTURES, 'stray'))).toEqual(['every-file-in-a-layer: src/grab-bag/utils.ts -> src/tasks/task.ts']);
  });
});
