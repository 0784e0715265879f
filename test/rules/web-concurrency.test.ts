/** The warning of a start whose WEB_CONCURRENCY outnumbers the cores (src/config.ts). */
import { describe, expect, it } from 'vitest';
import { concurrencyWarning } from '../../src/config.js';

describe('WEB_CONCURRENCY against the cores', () => {
  it('gives no warning up to the cores', () => {
    expect(concurrencyWarning(1, 1)).toBeUndefined();
    expect(concurrencyWarning(2, 2)).toBeUndefined();
    expect(concurrencyWarning(3, 16)).toBeUndefined();
  });

  it('warns past them, naming both numbers and where the sizing is explained', () => {
    expect(concurrencyWarning(2, 1)).toBe(
      'WEB_CONCURRENCY=2 is more than the 1 core this process may use: the extra processes add CPU per request and no throughput; ' +
        'set it to the cores left to the service (docs/configuration.md, WEB_CONCURRENCY)',
    );
    expect(concurrencyWarning(5, 4)).toMatch(/^WEB_CONCURRENCY=5 is more than the 4 cores /);
  });
});
