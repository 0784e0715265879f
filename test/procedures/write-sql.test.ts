/**
 * The SQL every write sends, committed as one file per write under test/procedures/write-sql/ (the way
 * Immich commits its query snapshots): a change to a write's statements shows in review as a
 * diff of those files. Each write runs through its procedure (createCaller, no HTTP) on a
 * database of its own, with a clock that does not move, and the statements the ORM sends are
 * written out in order, one per paragraph, formatted one clause a line
 * (test/helpers/sql-format.ts), their parameters as `?`.
 * The writes made by a write function (docs/design/writes.md) send one call, the same for
 * every write; their SQL is the function's, committed by test/procedures/write-functions.test.ts.
 *
 * After a deliberate change: `npx vitest run test/procedures/write-sql.test.ts -u` rewrites the files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { writes } from '../../src/app/write-functions.js';
import { createCaller } from '../../src/app/router.js';
import { ManualClock } from '../../src/core/clock.js';
import { createContextInner } from '../../src/core/context.js';
import { Announcer } from '../../src/writes/announcer.js';
import { authenticate } from '../../src/users/authentication.js';
import { formatStatements } from '../helpers/sql-format.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';

const clock = new ManualClock(T0);
const DUE = Math.floor(T0 / 1000) + 7 * 86_400;
let orm: MikroORM;
/** The writes' NOTIFYs, sent after their answers: `sqlOf` waits for them, so they are part of each write's SQL. */
const announcer = new Announcer(() => orm.em.fork());
let log: string[] | null = null;

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), {
    migrate: true,
    poolSize: 4,
    onQuery: (line) => {
      // The idempotency records' prune starts after a keyed write, detached from every request
      // (src/writes/idempotency.ts `pruneNowAndThen`): when its statement arrives is not the write's.
      if (log && line.startsWith('[query]') && !/from idempotency_keys (where created_at <=|k where k\.user_id = \? and k\.created_at <=)/.test(line)) log.push(line);
    },
  });
});
afterAll(async () => {
  await orm?.close(true);
});

function caller(token?: string, headers: Record<string, string> = {}) {
  return createCaller(() => {
    const em = orm.em.fork();
    return createContextInner({
      em, clock, writes, announcer, passwordHashCost: 1024,
      authenticate: (a) => authenticate(em, a, clock.now()),
      headers: { ...headers, authorization: token },
    });
  });
}

/** A statement as logged, without the log's prefix and timing, its white space folded. */
const statementOf = (line: string) =>
  line.replace(/^\[query\] /, '').replace(/ \[took \d+ ms(, [^\]]*)?\]$/, '').replace(/\s+/g, ' ').replace(/\bw_[0-9a-f]{16}\./g, 'w.').trim();

/** Runs `write` and returns the statements it sent. */
async function sqlOf(write: () => Promise<unknown>): Promise<string[]> {
  await announcer.idle(); // an earlier write's NOTIFY is not this one's
  log = [];
  try {
    await write().catch(() => undefined); // refusals are writes too: their statements count
    await announcer.idle();
    return log.map(statementOf);
  } finally {
    log = null;
  }
}

const snapshot = async (name: string, statements: string[]) =>
  expect(`-- ${name}\n\n${(await formatStatements(statements)).join('\n\n')}\n`).toMatchFileSnapshot(`./write-sql/${name}.sql`);

let users = 0;
async function user() {
  const doc = await caller().users.register({ user: { username: `writer${++users}`, password: 'correct horse' } });
  return { token: doc.meta.token as string, api: caller(doc.meta.token as string) };
}

describe('the SQL of every write', () => {
  it('users: register, authorize, revoke', async () => {
    await snapshot('users.register', await sqlOf(() => caller().users.register({ user: { username: 'someone', password: 'correct horse' } })));
    await snapshot('users.authorize', await sqlOf(() => caller().users.authorize({ username: 'someone', password: 'correct horse' })));
    const { token } = await user();
    await snapshot('users.revoke', await sqlOf(() => caller(token).users.revoke()));
  });

  it('projects: create, update, rename, start, pause, restart, finish, refused start, delete', async () => {
    const { api } = await user();
    await snapshot('projects.create', await sqlOf(() => api.projects.create({ project: { name: 'Coffee' } })));
    const { data: { id } } = await api.projects.create({ project: { name: 'Tea' } });
    await api.tasks.create({ task: { label: 'Boil', project_id: id } });
    await snapshot('projects.update', await sqlOf(() => api.projects.update({ id, project: { description: 'Green' } })));
    await snapshot('projects.update-name', await sqlOf(() => api.projects.update({ id, project: { name: 'Oolong' } })));
    await snapshot('projects.changeState-start', await sqlOf(() => api.projects.changeState({ id, project: { state: 'started', due_at: DUE } })));
    await snapshot('projects.changeState-pause', await sqlOf(() => api.projects.changeState({ id, project: { state: 'paused' } })));
    await snapshot('projects.changeState-restart', await sqlOf(() => api.projects.changeState({ id, project: { state: 'started' } })));
    await snapshot('projects.changeState-finish', await sqlOf(() => api.projects.changeState({ id, project: { state: 'finished' } })));
    await snapshot('projects.changeState-refused', await sqlOf(() => api.projects.changeState({ id, project: { state: 'paused' } })));
    await snapshot('projects.delete', await sqlOf(() => api.projects.delete({ id })));
  });

  it('tasks: create alone and in a project, update, move, detach, change state, refused, abandon, reorder', async () => {
    const { api } = await user();
    const { data: project } = await api.projects.create({ project: { name: 'Garden' } });
    let dig = 0;
    await snapshot('tasks.create', await sqlOf(async () => (dig = (await api.tasks.create({ task: { label: 'Dig' } })).data.id)));
    await snapshot('tasks.create-in-project', await sqlOf(() => api.tasks.create({ task: { label: 'Sow', project_id: project.id } })));
    const { data: task } = await api.tasks.create({ task: { label: 'Water' } });
    await snapshot('tasks.update', await sqlOf(() => api.tasks.update({ id: task.id, task: { label: 'Water well' } })));
    await snapshot('tasks.update-project', await sqlOf(() => api.tasks.update({ id: task.id, task: { project_id: project.id } })));
    await snapshot('tasks.update-detach', await sqlOf(() => api.tasks.update({ id: task.id, task: { project_id: null } })));
    await snapshot('tasks.changeState', await sqlOf(() => api.tasks.changeState({ id: task.id, task: { state: 'planned' } })));
    await snapshot('tasks.changeState-refused', await sqlOf(() => api.tasks.changeState({ id: task.id, task: { state: 'started' } })));
    await snapshot('tasks.changeState-abandon', await sqlOf(() => api.tasks.changeState({ id: task.id, task: { state: 'abandoned' } })));
    // Dig (1st) after Sow (2nd): a reorder that moves two tasks.
    await snapshot('tasks.reorder', await sqlOf(() => api.tasks.reorder({ id: dig, task: { order: 2 } })));
    expect((await api.tasks.get({ id: dig })).data.attributes.order).toBe(2);
  });

  it('with an Idempotency-Key or If-Match every write runs as its transaction', async () => {
    const { token, api } = await user();
    const keyed = caller(token, { 'Idempotency-Key': 'plant-1' });
    await snapshot('keyed.tasks.create', await sqlOf(() => keyed.tasks.create({ task: { label: 'Plant' } })));
    await snapshot('keyed.tasks.create-replay', await sqlOf(() => keyed.tasks.create({ task: { label: 'Plant' } })));
    const { data: task } = await api.tasks.create({ task: { label: 'Prune' } });
    const ifMatch = caller(token, { 'If-Match': '"t0.0"' });
    await snapshot('if-match.tasks.changeState-stale', await sqlOf(() => ifMatch.tasks.changeState({ id: task.id, task: { state: 'planned' } })));
  });
});
