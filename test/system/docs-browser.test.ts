/**
 * The docs page (/docs/, Swagger UI over openapi.json) in a real headless Chromium: every
 * operation and the tag sections render from assets the service serves itself (no other
 * origin is contacted) under its Content-Security-Policy, and "Try it out" → "Execute"
 * reaches the running service: register with an edited body, authorise with the returned
 * token through the Authorize dialog, then call operations that need it. A screenshot of the
 * visible part goes to test-artifacts/docs.png.
 *
 * Needs Debian's chromium at /usr/bin/chromium (driven by playwright-core). Without it the
 * test is skipped, except with CI=true, where a missing browser fails it.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { chromium, type Browser, type Locator, type Page, type Response } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { operations } from '../helpers/openapi-document.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const inCI = process.env.CI === 'true';
const artifacts = new URL('../../test-artifacts/', import.meta.url);
if (!hasChromium && !inCI) console.warn(`test/system/docs-browser.test.ts: skipped, ${CHROMIUM} is missing (apt-get install chromium)`);

describe('the docs page in a browser', () => {
  let app: TestApp | undefined;
  let browser: Browser | undefined;
  let page: Page;
  /** The answer to the page's one load, made before the tests (which may run in any order). */
  let docsResponse: Response | null = null;
  /** Page-level problems: uncaught errors, refused scripts (CSP), failed or foreign requests. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    if (!hasChromium) return;
    app = await startTestApp();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      // The 401 and 422 answers the test asks for are logged as failed loads; they are not page errors.
      if (message.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) {
        pageErrors.push(message.text());
      }
    });
    page.on('requestfailed', (request) => pageErrors.push(`failed: ${request.url()}`));
    page.on('request', (request) => {
      if (!request.url().startsWith(app!.baseUrl) && !request.url().startsWith('data:')) pageErrors.push(`external: ${request.url()}`);
    });
    docsResponse = await page.goto(`${app.baseUrl}/docs/`);
    await page.locator('.opblock').first().waitFor();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  function requireBrowser(skip: (note: string) => never) {
    if (hasChromium) return;
    if (inCI) throw new Error(`CI=true but ${CHROMIUM} is missing: install Debian's chromium package (.ci/run does).`);
    skip(`${CHROMIUM} is missing: install Debian's chromium package to run the docs page test`);
  }

  /** Expands an operation, switches it to "Try it out", and returns its block. */
  async function tryOut(operationId: string): Promise<Locator> {
    const block = page.locator(`.opblock[id$="-${operationId}"]`);
    await eventually(async () => (await block.count()) === 1, { message: `operation ${operationId} on the page` });
    await block.locator('.opblock-summary').first().click();
    await block.locator('button.try-out__btn').click();
    return block;
  }

  /** Clicks Execute and waits for the live response; returns its status and body text. */
  async function execute(block: Locator): Promise<{ status: string; body: string }> {
    const status = block.locator('.live-responses-table .response .response-col_status').first();
    // A response from an earlier run of this operation: clear it, so that the one awaited is new.
    const clear = block.locator('button.btn-clear');
    if (await clear.count()) {
      await clear.click();
      await status.waitFor({ state: 'detached' });
    }
    await block.locator('button.execute').click();
    await status.waitFor();
    const body = (await block.locator('.live-responses-table .response-col_description pre').first().textContent()) ?? '';
    return { status: ((await status.textContent()) ?? '').trim(), body };
  }

  it('lists the operations under their tags', async (ctx) => {
    requireBrowser(ctx.skip);
    expect(docsResponse?.status()).toBe(200);
    await page.locator('.opblock').first().waitFor();
    expect(await page.title()).toBe('Planning service API');
    const count = operations.length;
    await eventually(async () => (await page.locator('.opblock').count()) === count, { message: `the ${count} operations on the page` });
    const tags = await page.locator('.opblock-tag-section h3.opblock-tag').evaluateAll((els) => els.map((el) => el.getAttribute('data-tag')));
    expect(tags).toEqual(['users', 'tokens', 'projects', 'tasks', 'batch', 'events', 'webhooks']);
    for (const tag of tags) expect(await page.locator(`#operations-tag-${tag}`).count(), `#operations-tag-${tag}`).toBe(1);
    // The tag descriptions of openapi.json are shown with the sections.
    await eventually(async () => (await page.getByText('Registration, login (access tokens) and the current user', { exact: false }).count()) === 1, {
      message: 'the users tag description',
    });
    for (const summary of ['Register a user', 'Log in', 'Create a project', 'List projects', 'Change the state of a project', 'Create a task', 'Move a task in the order']) {
      await eventually(async () => (await page.getByText(summary, { exact: true }).count()) === 1, { message: summary });
    }
    const perTag = Object.fromEntries(
      await Promise.all(
        ['users', 'tokens', 'projects', 'tasks', 'batch', 'events'].map(async (tag) => [tag, await page.locator(`.opblock-tag-section:has(h3[data-tag="${tag}"]) .opblock`).count()]),
      ),
    );
    expect(perTag).toEqual({ users: 8, tokens: 5, projects: 6, tasks: 6, batch: 1, events: 2 });
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it('executes requests against the service: register, authorise, then an operation that needs the token', async (ctx) => {
    requireBrowser(ctx.skip);
    const username = `docs_${Date.now().toString(36)}`;

    // POST /api/users, with the example body edited to a fresh username.
    const register = await tryOut('users-register');
    const textarea = register.locator('textarea.body-param__text');
    expect(JSON.parse(await textarea.inputValue())).toEqual({ user: { username: 'alice', password: 'correct horse battery staple', time_zone: 'Europe/Paris' } });
    await textarea.fill(JSON.stringify({ user: { username, password: 'correct horse battery staple' } }, null, 2));
    const registered = await execute(register);
    expect(registered.status, registered.body).toBe('201');
    const token = JSON.parse(registered.body).meta.token as string;
    expect(token).toMatch(/\S{20,}/);

    // Without authorising, GET /api/users/me is 401 with the envelope.
    const me = await tryOut('users-me');
    const anonymous = await execute(me);
    expect(anonymous.status).toBe('401');
    expect(JSON.parse(anonymous.body).errors[0].code).toBe('unauthorized');

    // The Authorize dialog takes the token for the apiKey scheme.
    await page.locator('.auth-wrapper button.authorize').click();
    const dialog = page.locator('.dialog-ux .modal-ux');
    await dialog.locator('input[type="text"], input[type="password"]').first().fill(token);
    await dialog.locator('button.modal-btn.auth.authorize').click();
    await dialog.locator('button.btn-done, button.modal-btn.auth.btn-done').first().click();

    const authorised = await execute(me);
    expect(authorised.status, authorised.body).toBe('200');
    expect(JSON.parse(authorised.body).data.attributes.username).toBe(username);
    // The user the page registered is real: it can log in over plain HTTP.
    const login = await app!.request('POST', '/api/users/authorizations', { body: { username, password: 'correct horse battery staple' } });
    expect(login.status).toBe(201);

    // A body operation with the token: create the example project.
    const create = await tryOut('projects-create');
    const created = await execute(create);
    expect(created.status, created.body).toBe('201');
    expect(JSON.parse(created.body).data.attributes).toMatchObject({ name: 'Coffee', state: 'newed' });
    const again = await execute(create);
    expect(again.status).toBe('422');
    expect(JSON.parse(again.body).errors[0].code).toBe('taken');

    mkdirSync(artifacts, { recursive: true });
    // The visible part only, with its own time bound: a full-page capture of the expanded page took
    // over 15 s on a loaded CI machine, and the picture is an artifact, not what this test checks.
    await page.screenshot({ path: new URL('docs.png', artifacts).pathname, timeout: 45_000 });
    expect(existsSync(new URL('docs.png', artifacts))).toBe(true);
    expect(pageErrors).toEqual([]);
  }, 90_000);
});
