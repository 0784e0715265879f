/**
 * openapi.json is usable by real tooling: the REST client that @hey-api/openapi-ts generates
 * from it (clients/rest/, `npm run client`) drives a whole scenario against the running
 * service, typed end to end, and errors come back as the documented envelope. The committed
 * client must be what the generator gives for the committed document.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type Client } from '../../clients/rest/client/index.js';
import {
  batchApply,
  projectsChangeState,
  projectsCreate,
  projectsDelete,
  projectsGet,
  projectsList,
  projectsUpdate,
  tasksChangeState,
  tasksCreate,
  tasksGet,
  tasksList,
  tasksReorder,
  tasksUpdate,
  usersAuthorize,
  usersMe,
  usersRegister,
  usersRevoke,
  type BatchApplyData,
  type ErrorEnvelope,
} from '../../clients/rest/index.js';
import { DAY, T0, seconds, startTestApp, type TestApp } from '../helpers/test-app.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const committedClient = path.join(root, 'clients/rest');

function filesUnder(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(path.relative(dir, full), readFileSync(full, 'utf8'));
    }
  };
  walk(dir);
  return files;
}

describe('the generated REST client', () => {
  it('is what `npm run client` generates from openapi.json (regenerate after `npm run openapi`)', async () => {
    const { createClient: generate } = await import('@hey-api/openapi-ts');
    const config = await (await import('../../openapi-ts.config.js')).default;
    if (typeof config.output !== 'object' || Array.isArray(config.output)) throw new Error('openapi-ts.config.ts: output must be one object');
    const out = mkdtempSync(path.join(tmpdir(), 'rest-client-'));
    try {
      await generate({ ...config, output: { ...config.output, path: out }, logs: { level: 'silent', file: false } });
      const generated = filesUnder(out);
      const committed = filesUnder(committedClient);
      expect([...committed.keys()].sort()).toEqual([...generated.keys()].sort());
      for (const [file, text] of generated) expect(committed.get(file), `clients/rest/${file}`).toBe(text);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  describe('against the running service', () => {
    let app: TestApp;
    /** No token: register and login. */
    let anonymous: Client;
    /** The user's token, sent as the documented apiKey header. */
    let client: Client;
    let token = '';

    beforeAll(async () => {
      app = await startTestApp();
      anonymous = createClient({ baseUrl: app.baseUrl });
      client = createClient({ baseUrl: app.baseUrl, auth: () => token });
    });
    afterAll(async () => {
      await app?.close();
    });

    function expectEnvelope(error: ErrorEnvelope | undefined, status: number, codes: string[]) {
      expect(error, 'an error envelope').toBeDefined();
      expect(Object.keys(error!)).toEqual(['errors']);
      expect(error!.errors.map((e) => e.code)).toEqual(codes);
      for (const e of error!.errors) {
        expect(e.status).toBe(String(status));
        expect(e.title).toBeTruthy();
        expect(e.detail).toBeTruthy();
      }
    }

    it('runs a whole scenario: register, login, projects, tasks, pages, order, states, errors', async () => {
      const username = `rest_${Date.now().toString(36)}`;
      const password = 'correct horse battery staple';

      // Register and log in, without a token.
      const registered = await usersRegister({ client: anonymous, body: { user: { username, password } } });
      expect(registered.response?.status).toBe(201);
      expect(registered.data?.data.attributes.username).toBe(username);
      const taken = await usersRegister({ client: anonymous, body: { user: { username, password } } });
      expect(taken.response?.status).toBe(422);
      expectEnvelope(taken.error, 422, ['taken']);
      expect(taken.error?.errors[0]?.source?.pointer).toBe('/user/username');

      const login = await usersAuthorize({ client: anonymous, body: { username, password } });
      expect(login.response?.status).toBe(201);
      token = login.data!.meta.token;
      const badLogin = await usersAuthorize({ client: anonymous, body: { username, password: 'not the password' } });
      expect(badLogin.response?.status).toBe(401);
      expectEnvelope(badLogin.error, 401, ['login_failed']);

      const me = await usersMe({ client });
      expect(me.response?.status).toBe(200);
      expect(me.data?.data).toEqual({ type: 'user', id: registered.data!.data.id, attributes: { username, timeZone: 'UTC' } });
      const noToken = await usersMe({ client: anonymous });
      expect(noToken.response?.status).toBe(401);
      expectEnvelope(noToken.error, 401, ['unauthorized']);

      // A project, started.
      const created = await projectsCreate({ client, body: { project: { name: 'Coffee' } } });
      expect(created.response?.status).toBe(201);
      const coffee = created.data!.data;
      expect(coffee.attributes).toMatchObject({ name: 'Coffee', slug: 'coffee', state: 'newed', isInProgress: false });
      expect(created.data!.meta.stability).toBe('unstable');
      const invalid = await projectsCreate({ client, body: { project: { name: `a b${'c'.repeat(120)}` } } });
      expect(invalid.response?.status).toBe(422);
      expectEnvelope(invalid.error, 422, ['invalid', 'too_long']);

      const due = seconds(T0) + 30 * DAY;
      const refused = await projectsChangeState({ client, path: { id: coffee.id }, body: { project: { state: 'started' } } });
      expect(refused.response?.status).toBe(422);
      expectEnvelope(refused.error, 422, ['must_be_set']);
      const started = await projectsChangeState({ client, path: { id: coffee.id }, body: { project: { state: 'started', due_at: due } } });
      expect(started.response?.status).toBe(200);
      expect(started.data?.data.attributes).toMatchObject({ state: 'started', dueAt: due, startedAt: seconds(T0), isInProgress: true });
      const described = await projectsUpdate({ client, path: { id: coffee.id }, body: { project: { description: 'Beans, heat and patience.' } } });
      expect(described.data?.data.attributes.description).toBe('Beans, heat and patience.');

      // Tasks in each initial state.
      const beans = (await tasksCreate({ client, body: { task: { label: 'Buy beans', project_id: coffee.id } } })).data!.data;
      expect(beans.attributes.state).toBe('started');
      const descale = (await tasksCreate({ client, body: { task: { label: 'Descale', planned_at: seconds(T0) + DAY } } })).data!.data;
      expect(descale.attributes).toMatchObject({ state: 'planned', plannedCount: 1, plannedAt: seconds(T0) + DAY });
      const grind = await tasksCreate({ client, body: { task: { label: 'Grind' } } });
      expect(grind.response?.status).toBe(201);
      expect(grind.data!.data.relationships.project.data).toBeNull();
      const orphan = await tasksCreate({ client, body: { task: { label: 'x', project_id: 2_147_483_647 } } });
      expect(orphan.response?.status).toBe(422);
      expectEnvelope(orphan.error, 422, ['record_not_found']);

      // Pages.
      for (let i = 1; i <= 25; i++) await projectsCreate({ client, body: { project: { name: `p${i}` } } });
      const page1 = await projectsList({ client });
      expect(page1.data?.data).toHaveLength(25);
      expect(page1.data?.links.next).toBe(`${app.baseUrl}/api/users/me/projects?page=2`);
      const page2 = await projectsList({ client, query: { page: 2 } });
      expect(page2.data?.data.map((p) => p.attributes.name)).toEqual(['p25']);
      expect(page2.data?.links).toEqual({
        first: `${app.baseUrl}/api/users/me/projects?page=1`,
        last: `${app.baseUrl}/api/users/me/projects?page=2`,
        prev: `${app.baseUrl}/api/users/me/projects?page=1`,
      });
      const page0 = await tasksList({ client, query: { page: 0 } });
      expect(page0.response?.status).toBe(400);
      expectEnvelope(page0.error, 400, ['invalid']);
      expect(page0.error?.errors[0]?.source).toEqual({ parameter: 'page' });

      // Order: the last task first.
      const reordered = await tasksReorder({ client, path: { id: grind.data!.data.id }, body: { task: { order: 1 } } });
      expect(reordered.response?.status).toBe(200);
      expect(reordered.data?.data).toEqual([
        { type: 'task', id: grind.data!.data.id, attributes: { order: 1 } },
        { type: 'task', id: beans.id, attributes: { order: 2 } },
        { type: 'task', id: descale.id, attributes: { order: 3 } },
      ]);
      const tasks = await tasksList({ client, query: { page: 1 } });
      expect(tasks.data?.data.map((t) => t.attributes.label)).toEqual(['Grind', 'Buy beans', 'Descale']);

      // States.
      const planned = await tasksChangeState({ client, path: { id: beans.id }, body: { task: { state: 'planned' } } });
      expect(planned.data?.data.attributes).toMatchObject({ state: 'planned', plannedCount: 1 });
      const finished = await tasksChangeState({ client, path: { id: beans.id }, body: { task: { state: 'finished' } } });
      expect(finished.data?.data.attributes).toMatchObject({ state: 'finished', finishedAt: seconds(T0) });
      const again = await tasksChangeState({ client, path: { id: beans.id }, body: { task: { state: 'finished' } } });
      expect(again.response?.status).toBe(422);
      expectEnvelope(again.error, 422, ['invalid_transition']);
      const relabelled = await tasksUpdate({ client, path: { id: beans.id }, body: { task: { label: 'Buy green beans', project_id: null } } });
      expect(relabelled.data?.data.attributes.label).toBe('Buy green beans');
      expect((await tasksGet({ client, path: { id: beans.id } })).data?.data.relationships.project.data).toBeNull();

      const paused = await projectsChangeState({ client, path: { id: coffee.id }, body: { project: { state: 'paused' } } });
      expect(paused.data?.data.attributes).toMatchObject({ state: 'paused', pausedAt: seconds(T0) });
      const missing = await projectsGet({ client, path: { id: 2_147_483_647 } });
      expect(missing.response?.status).toBe(404);
      expectEnvelope(missing.error, 404, ['record_not_found']);

      // Delete, and log out.
      const deleted = await projectsDelete({ client, path: { id: coffee.id } });
      expect(deleted.response?.status).toBe(204);
      expect(deleted.error).toBeUndefined();
      expect((await projectsGet({ client, path: { id: coffee.id } })).response?.status).toBe(404);
      const revoked = await usersRevoke({ client });
      expect(revoked.response?.status).toBe(204);
      const afterRevoke = await usersMe({ client });
      expect(afterRevoke.response?.status).toBe(401);
      expectEnvelope(afterRevoke.error, 401, ['unauthorized']);
    });

    it('sends a batch whose operations are typed one by one, refs in place of ids', async () => {
      const registered = await usersRegister({ client: anonymous, body: { user: { username: `batch_${Date.now().toString(36)}`, password: 'correct horse' } } });
      const own = createClient({ baseUrl: app.baseUrl, auth: () => registered.data!.meta.token });
      const operations: BatchApplyData['body']['operations'] = [
        { op: 'projects.create', ref: 'trip', input: { project: { name: 'Trip' } } },
        { op: 'tasks.create', ref: 'train', input: { task: { label: 'Book train', project_id: { ref: 'trip' } } } },
        { op: 'tasks.reorder', input: { id: { ref: 'train' }, task: { order: 1 } } },
      ];
      const applied = await batchApply({ client: own, body: { operations } });
      expect(applied.response?.status).toBe(200);
      expect(applied.data?.data.map((r) => r.status)).toEqual([201, 201, 200]);
      // What the generated types refuse: an input of another operation, a ref where no id goes, a ref that is no name.
      // @ts-expect-error tasks.create takes a task
      const wrongInput: BatchApplyData['body']['operations'][number] = { op: 'tasks.create', input: { project: { name: 'x' } } };
      // @ts-expect-error a ref stands for an id only
      const refAsLabel: BatchApplyData['body']['operations'][number] = { op: 'tasks.create', input: { task: { label: { ref: 'trip' } } } };
      // @ts-expect-error a ref is a name
      const numericRef: BatchApplyData['body']['operations'][number] = { op: 'projects.delete', input: { id: { ref: 1 } } };
      expect([wrongInput, refAsLabel, numericRef]).toHaveLength(3);
    });

    it('throws the envelope with throwOnError', async () => {
      await expect(usersMe({ client: anonymous, throwOnError: true })).rejects.toEqual({
        errors: [expect.objectContaining({ status: '401', code: 'unauthorized' })],
      });
    });
  });
});
