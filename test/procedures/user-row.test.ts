/**
 * Every write of a user locks and writes the user's row (docs/design/writes.md, "The lock"), in
 * one subtransaction with all else that touches it. Were the lock taken by the transaction and
 * the row then written by a subtransaction, the row would get a MultiXact for its xmax, which
 * every later reader of it resolves in pg_multixact: at 8 connections of one user that halved
 * the writes. (A foreign key's key share under the transaction's lock is no new lock, so the
 * webhooks' writes, which lock first and work in a savepoint, write no MultiXact either.) This
 * reads the row's versions off its pages (pageinspect) after each kind of write: none may have one.
 */
import { describe, expect, it } from 'vitest';
import { useProcedures } from '../helpers/procedures.js';

const procedures = useProcedures();

/** HEAP_XMAX_IS_MULTI of t_infomask (src/include/access/htup_details.h). */
const XMAX_IS_MULTI = 0x1000;

/** How many versions of rows of `users` on its pages have a MultiXact for their xmax. */
async function multiXacts(): Promise<number> {
  const em = procedures.orm.em.fork();
  await em.execute('create extension if not exists pageinspect');
  const [row] = await em.execute<Array<{ n: number }>>(
    `select count(*)::int as n
       from generate_series(0, (pg_relation_size('users') / current_setting('block_size')::int)::int - 1) as page,
            heap_page_items(get_raw_page('users', page)) as item
      where item.t_infomask & ${XMAX_IS_MULTI} <> 0`,
  );
  return row!.n;
}

describe("the user's row after each kind of write", () => {
  it('holds no MultiXact: plain, in a project, refused, keyed, batched, conditional, a webhook\'s, a token\'s, a ticket\'s', async () => {
    const user = await procedures.register();
    const keyed = (key: string) => procedures.caller(user.token, { 'Idempotency-Key': key });
    const steps: Array<[string, () => Promise<unknown>]> = [];
    let projectId = 0;
    let taskId = 0;
    steps.push(['a project created', async () => (projectId = (await user.api.projects.create({ project: { name: 'Row' } })).data.id)]);
    steps.push(['the project started', () => user.api.projects.changeState({ id: projectId, project: { state: 'started', due_at: 2_000_000_000 } } as never)]);
    steps.push(['a task created in it', async () => (taskId = (await user.api.tasks.create({ task: { label: 'in', project_id: projectId } })).data.id)]);
    steps.push(['a task created alone', () => user.api.tasks.create({ task: { label: 'alone' } })]);
    steps.push(['a state change', () => user.api.tasks.changeState({ id: taskId, task: { state: 'planned' } } as never)]);
    steps.push(['a refused state change', () => user.api.tasks.changeState({ id: taskId, task: { state: 'started' } } as never).catch((e) => e)]);
    steps.push(['a keyed create', () => keyed('row-1').tasks.create({ task: { label: 'keyed' } })]);
    steps.push(['a keyed refusal', () => keyed('row-2').tasks.changeState({ id: taskId, task: { state: 'started' } } as never).catch((e) => e)]);
    steps.push(['a keyed replay', () => keyed('row-1').tasks.create({ task: { label: 'keyed' } })]);
    steps.push(['a conditional state change', () => procedures.caller(user.token, { 'If-Match': '*' }).tasks.changeState({ id: taskId, task: { state: 'planned' } } as never)]);
    steps.push(['a reorder', () => user.api.tasks.reorder({ id: taskId, task: { order: 2 } })]);
    steps.push(['an abandon in the project', () => user.api.tasks.changeState({ id: taskId, task: { state: 'abandoned' } } as never)]);
    steps.push(['a batch', () => user.api.batch.apply.apply(null, [{
      operations: [
        { op: 'projects.create', ref: 'p', input: { project: { name: 'Batched' } } },
        { op: 'tasks.create', input: { task: { label: 'batched', project_id: { ref: 'p' } } } },
        { op: 'projects.delete', input: { id: { ref: 'p' } } },
      ],
    }])]);
    steps.push(['a refused batch', () => user.api.batch.apply.apply(null, [{
      operations: [
        { op: 'tasks.create', input: { task: { label: 'undone' } } },
        { op: 'tasks.changeState', input: { id: 1e12, task: { state: 'planned' } } },
      ],
    }]).catch((e) => e)]);
    steps.push(['a webhook created', () => user.api.webhooks.create({ webhook: { url: 'https://hooks.example.com/row' } })]);
    steps.push(['a keyed webhook created', () => keyed('row-3').webhooks.create({ webhook: { url: 'https://hooks.example.com/keyed' } })]);
    steps.push(['a keyed webhook refusal', () => keyed('row-4').webhooks.update({ id: 1e12, webhook: { description: 'none' } }).catch((e) => e)]);
    steps.push(['a keyed token created', () => keyed('row-5').tokens.create({ token: { name: 'row', scopes: ['tasks:read'], expires_at: Math.floor(Date.now() / 1000) + 86_400 } })]);
    steps.push(['a keyed stream ticket', () => keyed('row-6').events.ticket()]);
    steps.push(['the project deleted', () => user.api.projects.delete({ id: projectId })]);
    const found: Array<[string, number]> = [];
    for (const [name, step] of steps) {
      await step();
      found.push([name, await multiXacts()]);
    }
    expect(found).toEqual(steps.map(([name]) => [name, 0]));
    // The check can fail: a row locked by the transaction and written by its subtransaction has one.
    const em = procedures.orm.em.fork();
    await em.begin();
    try {
      await em.execute('select 1 from users where id = ? for no key update', [user.id]);
      await em.execute('savepoint s');
      await em.execute('update users set open_tasks = open_tasks where id = ?', [user.id]);
      await em.commit();
    } catch (error) {
      await em.rollback();
      throw error;
    }
    expect(await multiXacts()).toBeGreaterThan(0);
  });
});
