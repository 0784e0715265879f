/**
 * The docs page in a real browser (Debian's Chromium driven by playwright-core): it renders
 * every operation from /openapi.json with assets served by the service itself (no network),
 * under the service's Content-Security-Policy, and "Try it out" reaches the running service.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/test-app.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env.CI === 'true') {
  throw new Error(`${CHROMIUM} is missing: CI must install Debian's chromium package (see .ci/run).`);
}
if (!available) console.warn(`docs browser test skipped: ${CHROMIUM} not found (apt-get install chromium)`);

describe.skipIf(!available)('the /docs page in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    app = await startTestApp();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('lists the operations and runs a request against the service', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()}`));
    page.on('request', (r) => {
      if (!r.url().startsWith(app.baseUrl) && !r.url().startsWith('data:')) problems.push(`external: ${r.url()}`);
    });

    await page.goto(`${app.baseUrl}/docs/`);
    await page.getByText('Create a project').first().waitFor({ timeout: 20_000 });
    for (const tag of ['users', 'projects', 'tasks']) {
      await expect(page.locator(`#operations-tag-${tag}`).count()).resolves.toBe(1);
    }
    const operations = await page.locator('.opblock').count();
    expect(operations).toBe(16);

    // Try it out: register a user through the page.
    const register = page.locator('#operations-users-users-register');
    await register.locator('.opblock-summary').click();
    await register.getByRole('button', { name: 'Try it out' }).click();
    await register.locator('textarea.body-param__text').fill(JSON.stringify({ user: { username: 'from_docs', password: 'correct horse' } }));
    await register.getByRole('button', { name: 'Execute' }).click();
    await register.locator('.live-responses-table tbody .response-col_status').first().waitFor({ timeout: 20_000 });
    await expect(register.locator('.live-responses-table tbody .response-col_status').first().innerText()).resolves.toContain('201');

    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/docs.png', fullPage: false });
    const login = await app.request('POST', '/api/users/authorizations', { body: { username: 'from_docs', password: 'correct horse' } });
    expect(login.status).toBe(201);
    expect(problems).toEqual([]);
  }, 60_000);
});
