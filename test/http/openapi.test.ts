/**
 * What the running app serves of openapi.json (test/rules/openapi.test.ts checks the
 * document itself): the committed file at /openapi.json, and the docs page with its assets.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

const committedPath = new URL('../../openapi.json', import.meta.url);

describe('served documents', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('serves /openapi.json equal to the committed file', async () => {
    const res = await app.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(JSON.parse(readFileSync(committedPath, 'utf8')));
  });

  it('serves the docs page and its assets itself', async () => {
    const page = await app.request('GET', '/docs/');
    expect(page.status).toBe(200);
    expect(page.text).toContain('swagger-ui');
    const scripts = [...page.text.matchAll(/src="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts.length).toBeGreaterThan(0);
    for (const src of scripts) {
      expect(src.startsWith('http'), `${src} must be served locally`).toBe(false);
      const asset = await app.request('GET', new URL(src, `${app.baseUrl}/docs/`).pathname);
      expect(asset.status, src).toBe(200);
    }
  });
});
