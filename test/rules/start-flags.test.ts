/** The bench runs the service with the Node flags `npm start` uses (bench/lib/service-flags.ts). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SERVICE_NODE_FLAGS } from '../../bench/lib/service-flags.js';

describe('npm start', () => {
  it('runs the built service with the flags the bench measures', () => {
    const start = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(start).toContain(`node ${SERVICE_NODE_FLAGS.join(' ')} dist/src/main.js`);
  });
});
