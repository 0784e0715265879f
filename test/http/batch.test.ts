/**
 * POST /api/batch and tRPC batch.apply (API-CONTRACT.md §15), on the real database: operations
 * in order in one transaction, refs to earlier creates, per-operation If-Match, rules after
 * each step (the swap at the limit of 3 started projects), all or nothing (rows and change log
 * compared before and after a failure at each index), error pointers under
 * /operations/<index>, events in order, one Idempotency-Key for the batch, the rate limit
 * counting operations, and the batch's own shape refused before anything runs.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DAY, T0, onlyError, seconds, useTestAppWithSql } from '../helpers/test-app.js';
import { META } from '../helpers/envelope.js';
import pg from 'pg';
import { keyLock } from '../../src/writes/idempotency.js';
import { eventually } from '../helpers/eventually.js';

const { app, db } = useTestAppWithSql({ resetClock: true });

const DUE = seconds(T0) + 7 * DAY;
const BATCH = '/api/batch';

const batch = (token: string, operations: unknown[], headers: Record<string, string> = {}) =>
  app.request('POST', BATCH, { token, body: { operations }, headers });

/** Every row of the user's projects, tasks and change log, to compare before and after. */
async function snapshot(userId: number) {
  const rows = async (sql: string) => (await db.query(sql, [userId])).rows;
  return {
    projects: await rows('select * from projects where user_id = $1 order by id'),
    tasks: await rows('select * from tasks where user_id = $1 order by id'),
    events: await rows('select seq, type, data from events where user_id = $1 order by seq'),
    mark: await rows('select last_event_seq from users where id = $1'),
    keys: await rows('select key, status from idempotency_keys where user_id = $1 order by key'),
  };
}

async function eventsAfter(token: string, after: string) {
  const res = await app.request('GET', `/api/users/me/events?after=${after}`, { token });
  expect(res.status).toBe(200);
  return res.body.data as Array<{ id: string; type: string; data: any }>;
}

async function lastEventId(token: string): Promise<string> {
  return (await app.request('GET', '/api/users/me/events', { token })).body.meta.last_event_id;
}

describe('a batch that succeeds', () => {
  it('runs the contract example: refs, per-operation If-Match, answers in order with their statuses', async () => {
    const { token } = await app.register();
    const paused = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Old' } } })).body.data.id;
    const started = await app.request('PUT', `/api/projects/${paused}/state`, { token, body: { project: { state: 'started', due_at: DUE } } });
    const etag = started.headers.get('etag')!;
    const before = await lastEventId(token);
    const res = await batch(token, [
      { op: 'projects.create', ref: 'trip', input: { project: { name: 'Trip' } } },
      { op: 'tasks.create', input: { task: { label: 'Book train', project_id: { ref: 'trip' } } } },
      { op: 'projects.changeState', input: { id: paused, project: { state: 'paused' } }, if_match: etag },
      { op: 'projects.changeState', input: { id: { ref: 'trip' }, project: { state: 'started', due_at: DUE } } },
    ]);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['data']);
    expect(res.body.data.map((r: { status: number }) => r.status)).toEqual([201, 201, 200, 200]);
    const trip = res.body.data[0].body.data;
    const task = res.body.data[1].body.data;
    expect(trip).toMatchObject({ type: 'project', attributes: { name: 'Trip', state: 'newed' }, relationships: { tasks: { data: [] } } });
    expect(res.body.data[0].body.meta).toEqual(META);
    expect(task).toMatchObject({ type: 'task', attributes: { label: 'Book train', state: 'newed' }, relationships: { project: { data: { type: 'project', id: trip.id } } } });
    expect(res.body.data[2].body.data.attributes.state).toBe('paused');
    const last = res.body.data[3].body.data;
    expect(last).toMatchObject({ id: trip.id, attributes: { state: 'started', dueAt: DUE, startedAt: seconds(T0) } });
    expect(last.relationships.tasks.data).toEqual([{ type: 'task', id: task.id }]);
    // Events: each operation's, in order, each document as that operation left it; the two
    // `project.updated` of the trip (its task added, then started) folded into the last, at its
    // place, with the final document (API-CONTRACT.md §15).
    const events = await eventsAfter(token, before);
    expect(events.map((e) => `${e.type}:${e.data.id}`)).toEqual([
      `project.created:${trip.id}`,
      `task.created:${task.id}`,
      `project.updated:${paused}`,
      `project.updated:${trip.id}`,
      `task.updated:${task.id}`,
    ]);
    expect(events[3]!.data).toEqual(last);
    expect(events[3]!.data.relationships.tasks.data).toEqual([{ type: 'task', id: task.id }]);
    expect(events[4]!.data.attributes.state).toBe('started');
    // What the batch answered is what is stored.
    const now = await app.request('GET', `/api/projects/${trip.id}`, { token });
    expect(now.body.data).toEqual(last);
  });

  it('folds the project.updated events of each project into its last, at its place, with the final document (100 operations)', async () => {
    const { token } = await app.register();
    const before = await lastEventId(token);
    const operations = [
      { op: 'projects.create', ref: 'a', input: { project: { name: 'A' } } },
      { op: 'projects.create', ref: 'b', input: { project: { name: 'B' } } },
      ...Array.from({ length: 98 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `t${i}`, project_id: { ref: i % 3 === 2 ? 'b' : 'a' } } } })),
    ];
    const res = await batch(token, operations);
    expect(res.status, res.text).toBe(200);
    const [a, b] = [res.body.data[0].body.data.id, res.body.data[1].body.data.id];
    const tasks = res.body.data.slice(2).map((r: { body: { data: { id: number } } }) => r.body.data.id);
    const events: Awaited<ReturnType<typeof eventsAfter>> = [];
    for (let page = await eventsAfter(token, before); page.length > 0; page = await eventsAfter(token, page.at(-1)!.id)) events.push(...page);
    // Unfolded there would be 98 project.updated, each with the list so far; folded, one per
    // project, where the last task created in it stood: B's last task is the 98th (i = 95),
    // A's the 97th and the 98th (i = 96 and 97) come after it.
    expect(events.map((e) => `${e.type}:${e.data.id}`)).toEqual([
      `project.created:${a}`,
      `project.created:${b}`,
      ...tasks.slice(0, 96).map((id: number) => `task.created:${id}`),
      `project.updated:${b}`,
      `task.created:${tasks[96]}`,
      `task.created:${tasks[97]}`,
      `project.updated:${a}`,
    ]);
    for (const id of [a, b]) {
      const now = await app.request('GET', `/api/projects/${id}`, { token });
      expect(events.find((e) => e.type === 'project.updated' && e.data.id === id)!.data).toEqual(now.body.data);
    }
    expect(events.find((e) => e.data.id === a && e.type === 'project.updated')!.data.relationships.tasks.data).toHaveLength(66);
  });

  it('writes the document of a project deleted later in the batch as it was before its deletion', async () => {
    const { token } = await app.register();
    const before = await lastEventId(token);
    const res = await batch(token, [
      { op: 'projects.create', ref: 'p', input: { project: { name: 'Short-lived' } } },
      { op: 'tasks.create', ref: 't', input: { task: { label: 'kept', project_id: { ref: 'p' } } } },
      { op: 'tasks.create', ref: 'u', input: { task: { label: 'abandoned', project_id: { ref: 'p' } } } },
      { op: 'projects.delete', input: { id: { ref: 'p' } } },
      { op: 'projects.create', ref: 'q', input: { project: { name: 'Next' } } },
      { op: 'tasks.update', input: { id: { ref: 't' }, task: { project_id: { ref: 'q' } } } },
    ]);
    expect(res.status, res.text).toBe(200);
    const [p, t, u, , q] = res.body.data.map((r: { body: { data: { id: number } } | null }) => r.body?.data.id);
    const events = await eventsAfter(token, before);
    expect(events.map((e) => `${e.type}:${e.data.id}`)).toEqual([
      `project.created:${p}`,
      `task.created:${t}`,
      `task.created:${u}`,
      `project.updated:${p}`,
      `project.deleted:${p}`,
      `task.updated:${t}`,
      `task.updated:${u}`,
      `project.created:${q}`,
      // t, abandoned when p went, joins q: q lists no abandoned task, its document stays as created.
      `task.updated:${t}`,
    ]);
    const deleted = events.find((e) => e.type === 'project.updated' && e.data.id === p)!;
    expect(deleted.data.attributes.name).toBe('Short-lived');
    expect(deleted.data.relationships.tasks.data.map((r: { id: number }) => r.id)).toEqual([t, u]);
    const created = events.find((e) => e.type === 'project.created' && e.data.id === q)!;
    expect(created.data).toEqual((await app.request('GET', `/api/projects/${q}`, { token })).body.data);
    expect(events.at(-1)!.data.relationships.project.data).toEqual({ type: 'project', id: q });
  });

  it('answers a delete as 204 with a null body, a reorder with its order document, and sees each step', async () => {
    const { token } = await app.register();
    const res = await batch(token, [
      { op: 'tasks.create', ref: 'a', input: { task: { label: 'a' } } },
      { op: 'tasks.create', ref: 'b', input: { task: { label: 'b' } } },
      { op: 'tasks.reorder', input: { id: { ref: 'b' }, task: { order: 1 } } },
      { op: 'projects.create', ref: 'p', input: { project: { name: 'P' } } },
      { op: 'tasks.update', input: { id: { ref: 'a' }, task: { project_id: { ref: 'p' } } } },
      { op: 'projects.delete', input: { id: { ref: 'p' } } },
      { op: 'tasks.changeState', input: { id: { ref: 'b' }, task: { state: 'planned' } } },
      { op: 'tasks.changeState', input: { id: { ref: 'b' }, task: { state: 'finished' } } },
    ]);
    expect(res.body.errors).toBeUndefined();
    expect(res.status).toBe(200);
    const [a, b] = [res.body.data[0].body.data.id, res.body.data[1].body.data.id];
    expect(res.body.data[2]).toEqual({ status: 200, body: { data: [{ type: 'task', id: b, attributes: { order: 1 } }, { type: 'task', id: a, attributes: { order: 2 } }], meta: META } });
    // The task joined a newed project: it became newed (API-CONTRACT.md §5).
    expect(res.body.data[4].body.data.attributes.state).toBe('newed');
    expect(res.body.data[5]).toEqual({ status: 204, body: null });
    expect(res.body.data[6].body.data.attributes).toMatchObject({ state: 'planned', plannedAt: seconds(T0), order: 1 });
    expect(res.body.data[7].body.data.attributes).toMatchObject({ state: 'finished', finishedAt: seconds(T0), order: 1 });
    // The delete abandoned task a and released it.
    const stored = await app.request('GET', `/api/tasks/${a}`, { token });
    expect(stored.body.data.attributes).toMatchObject({ state: 'abandoned', abandonedAt: seconds(T0) });
    expect(stored.body.data.relationships.project.data).toBeNull();
  });

  it('pauses one project and starts another at the limit of 3 started, which two requests cannot do', async () => {
    const { token } = await app.register();
    const ids: number[] = [];
    for (const name of ['A', 'B', 'C', 'D']) {
      ids.push((await app.request('POST', '/api/users/me/projects', { token, body: { project: { name } } })).body.data.id);
    }
    for (const id of ids.slice(0, 3)) {
      expect((await app.request('PUT', `/api/projects/${id}/state`, { token, body: { project: { state: 'started', due_at: DUE } } })).status).toBe(200);
    }
    // Alone, the fourth start is refused.
    const alone = await app.request('PUT', `/api/projects/${ids[3]}/state`, { token, body: { project: { state: 'started', due_at: DUE } } });
    expect(onlyError(alone.body)).toMatchObject({ code: 'reached_max_started' });
    // Start first, then pause: the rule holds after each step, so the start is refused.
    const wrongOrder = await batch(token, [
      { op: 'projects.changeState', input: { id: ids[3], project: { state: 'started', due_at: DUE } } },
      { op: 'projects.changeState', input: { id: ids[0], project: { state: 'paused' } } },
    ]);
    expect(wrongOrder.status).toBe(422);
    expect(wrongOrder.body).toEqual({ errors: [expect.objectContaining({ code: 'reached_max_started', source: { pointer: '/operations/0/project/state' } })] });
    const swap = await batch(token, [
      { op: 'projects.changeState', input: { id: ids[0], project: { state: 'paused' } } },
      { op: 'projects.changeState', input: { id: ids[3], project: { state: 'started', due_at: DUE } } },
    ]);
    expect(swap.status).toBe(200);
    const states = (await app.request('GET', '/api/users/me/projects', { token })).body.data.map((p: any) => p.attributes.state);
    expect(states).toEqual(['paused', 'started', 'started', 'started']);
  });
});

describe('a batch that fails', () => {
  it('keeps nothing when the operation at any index fails: rows, change log and its mark are as before', async () => {
    const { id, token } = await app.register();
    const project = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Base' } } })).body.data.id;
    const good = [
      { op: 'projects.create', ref: 'x', input: { project: { name: 'X' } } },
      { op: 'tasks.create', ref: 't', input: { task: { label: 'one', project_id: { ref: 'x' } } } },
      { op: 'tasks.create', input: { task: { label: 'two', project_id: project } } },
      { op: 'projects.changeState', input: { id: { ref: 'x' }, project: { state: 'started', due_at: DUE } } },
      { op: 'tasks.reorder', input: { id: { ref: 't' }, task: { order: 1 } } },
      { op: 'projects.update', input: { id: project, project: { description: 'edited' } } },
    ];
    const failing = { op: 'projects.changeState', input: { id: project, project: { state: 'finished' } } };
    for (let at = 0; at <= good.length; at++) {
      const before = await snapshot(id);
      const operations = [...good.slice(0, at), failing, ...good.slice(at)];
      const res = await batch(token, operations);
      expect(res.status).toBe(422);
      expect(res.body).toEqual({
        errors: [{ status: '422', code: 'invalid_transition', title: 'State change refused', detail: expect.any(String), source: { pointer: `/operations/${at}/project/state` } }],
      });
      expect(await snapshot(id)).toEqual(before);
    }
    // And the same operations without the failing one all land.
    expect((await batch(token, good)).status).toBe(200);
  });

  it('answers the failing operation\'s status: 404 for an unknown id, 412 for a stale if_match, 422 for a bad input', async () => {
    const { token } = await app.register();
    const created = await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Tagged' } } });
    const id = created.body.data.id;
    const stale = created.headers.get('etag')!;
    const notFound = await batch(token, [{ op: 'tasks.create', input: { task: { label: 'x' } } }, { op: 'projects.update', input: { id: 999_999, project: { name: 'Y' } } }]);
    expect(notFound.status).toBe(404);
    expect(onlyError(notFound.body)).toMatchObject({ code: 'record_not_found', source: { pointer: '/operations/1/project' } });
    // The first operation moves the version: the second's If-Match is stale by then.
    const changed = await batch(token, [
      { op: 'projects.update', input: { id, project: { description: 'one' } }, if_match: stale },
      { op: 'projects.update', input: { id, project: { description: 'two' } }, if_match: stale },
    ]);
    expect(changed.status).toBe(412);
    expect(onlyError(changed.body)).toMatchObject({ code: 'precondition_failed', source: { pointer: '/operations/1/if_match' } });
    expect((await app.request('GET', `/api/projects/${id}`, { token })).body.data.attributes.description).toBe('');
    const invalid = await batch(token, [{ op: 'projects.create', input: { project: { name: 'a b'.repeat(60) } } }]);
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors.map((e: any) => [e.code, e.source.pointer])).toEqual([
      ['invalid', '/operations/0/project/name'],
      ['too_long', '/operations/0/project/name'],
    ]);
    const missing = await batch(token, [{ op: 'tasks.create' }]);
    expect(onlyError(missing.body)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/operations/0/task' } });
    const noWrapper = await batch(token, [{ op: 'tasks.create', input: null }]);
    expect(onlyError(noWrapper.body)).toMatchObject({ code: 'parameter_missing', source: { pointer: '/operations/0/task' } });
    // A name taken by an earlier operation of the same batch.
    const taken = await batch(token, [
      { op: 'projects.create', input: { project: { name: 'Twice' } } },
      { op: 'projects.create', input: { project: { name: 'twice' } } },
    ]);
    expect(onlyError(taken.body)).toMatchObject({ code: 'taken', source: { pointer: '/operations/1/project/name' } });
    // An operation whose input breaks its own rules is reported with those: its project_id is
    // read in the state the batch has reached when it runs (a project an earlier operation
    // creates, by ref or by its coming id, or deletes), so not beside them (property
    // counterexamples: a project created then deleted by ref, one named by its coming id).
    const byRef = await batch(token, [
      { op: 'tasks.create', ref: 't', input: { task: { label: 'one' } } },
      { op: 'projects.create', ref: 'p', input: { project: { name: 'Alpha' } } },
      { op: 'tasks.update', input: { id: { ref: 't' }, task: { label: '', project_id: { ref: 'p' } } } },
    ]);
    expect(byRef.body.errors.map((e: any) => [e.code, e.source.pointer])).toEqual([['invalid', '/operations/2/task/label']]);
    const unknown = await batch(token, [{ op: 'tasks.create', input: { task: { label: '', project_id: 999_999 } } }]);
    expect(unknown.body.errors.map((e: any) => [e.code, e.source.pointer])).toEqual([['invalid', '/operations/0/task/label']]);
    // Its label fixed, it runs: the unknown project is its refusal.
    const fixed = await batch(token, [{ op: 'tasks.create', input: { task: { label: 'x', project_id: 999_999 } } }]);
    expect(fixed.body.errors.map((e: any) => [e.code, e.source.pointer])).toEqual([['record_not_found', '/operations/0/task/project_id']]);
  });

  it('answers the first failure in order: an operation refused by a rule before one whose input is refused, and the other way round', async () => {
    const { id, token } = await app.register();
    const project = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Base' } } })).body.data.id;
    const refusedByRule = { op: 'projects.changeState', input: { id: project, project: { state: 'finished' } } };
    const badInput = { op: 'tasks.create', input: { task: { label: '' } } };
    const create = { op: 'tasks.create', ref: 't', input: { task: { label: 'kept?' } } };
    const before = await snapshot(id);
    const ruleFirst = await batch(token, [create, refusedByRule, badInput]);
    expect(ruleFirst.status).toBe(422);
    expect(onlyError(ruleFirst.body)).toMatchObject({ code: 'invalid_transition', source: { pointer: '/operations/1/project/state' } });
    const inputFirst = await batch(token, [create, badInput, refusedByRule]);
    expect(inputFirst.status).toBe(422);
    expect(onlyError(inputFirst.body)).toMatchObject({ code: 'invalid', source: { pointer: '/operations/1/task/label' } });
    expect(await snapshot(id)).toEqual(before);
    // Kept under a key: the rule's refusal (the work ran), not the input's (it never ran).
    const ruleKey = randomUUID();
    const first = await batch(token, [create, refusedByRule, badInput], { 'Idempotency-Key': ruleKey });
    const again = await batch(token, [create, refusedByRule, badInput], { 'Idempotency-Key': ruleKey });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    const inputKey = randomUUID();
    await batch(token, [create, badInput, refusedByRule], { 'Idempotency-Key': inputKey });
    const fixed = await batch(token, [create, { ...badInput, input: { task: { label: 'fixed' } } }], { 'Idempotency-Key': inputKey });
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
    expect(fixed.body.data.map((d: { status: number }) => d.status)).toEqual([201, 201]);
  });

  it('answers 404 for an operation whose input is refused on an id that names no record at its turn, as that request alone', async () => {
    const { id, token } = await app.register();
    const task = (await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'Kept' } } })).body.data.id;
    const badEdit = (target: unknown) => ({ op: 'tasks.update', input: { id: target, task: { label: '' } } });
    const alone = await app.request('PATCH', '/api/tasks/999999', { token, body: { task: { label: '' } } });
    expect(alone.status).toBe(404);
    const project = (await app.request('POST', '/api/users/me/projects', { token, body: { project: { name: 'Gone' } } })).body.data.id;
    const before = await snapshot(id);
    const unknown = await batch(token, [{ op: 'tasks.create', input: { task: { label: 'x' } } }, badEdit(999_999)]);
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors).toEqual(alone.body.errors.map((e: any) => ({ ...e, source: { pointer: '/operations/1/task' } })));
    // Deleted by an earlier operation: gone at its turn.
    const gone = await batch(token, [
      { op: 'projects.delete', input: { id: project } },
      { op: 'projects.changeState', input: { id: project, project: { state: 'nonsense' } } },
    ]);
    expect(gone.status).toBe(404);
    expect(onlyError(gone.body)).toMatchObject({ code: 'record_not_found', source: { pointer: '/operations/1/project' } });
    // A record that exists at its turn (the user's own, or one made by ref before it): its input's refusal.
    for (const target of [task, { ref: 't' }]) {
      const refused = await batch(token, [{ op: 'tasks.create', ref: 't', input: { task: { label: 'new' } } }, badEdit(target)]);
      expect(refused.status).toBe(422);
      expect(onlyError(refused.body)).toMatchObject({ code: 'invalid', source: { pointer: '/operations/1/task/label' } });
    }
    expect(await snapshot(id)).toEqual(before);
    // Nothing kept under a key either: the request alone would keep nothing.
    const key = randomUUID();
    expect((await batch(token, [badEdit(999_999)], { 'Idempotency-Key': key })).status).toBe(404);
    expect((await batch(token, [{ op: 'tasks.update', input: { id: task, task: { label: 'Edited' } } }], { 'Idempotency-Key': key })).status).toBe(200);
    expect((await snapshot(id)).tasks.map((t: any) => t.label)).toEqual(['Edited']);
  });
});

describe('the shape of a batch', () => {
  const shapeErrors = async (body: unknown) => {
    const { token } = await app.register();
    const res = await app.request('POST', BATCH, { token, body });
    expect(res.status).toBe(422);
    return res.body.errors.map((e: any) => [e.code, e.source?.pointer]);
  };

  it('refuses an empty list, more than 100 operations, a missing or odd list', async () => {
    expect(await shapeErrors({ operations: [] })).toEqual([['invalid', '/operations']]);
    const many = Array.from({ length: 101 }, () => ({ op: 'tasks.create', input: { task: { label: 'x' } } }));
    expect(await shapeErrors({ operations: many })).toEqual([['too_long', '/operations']]);
    expect(await shapeErrors({})).toEqual([['parameter_missing', '/operations']]);
    expect(await shapeErrors({ operations: { 0: {} } })).toEqual([['invalid', '/operations']]);
  });

  it('refuses unknown ops, bad and unknown refs, all of them at once, before anything runs', async () => {
    const { id, token } = await app.register();
    const before = await snapshot(id);
    const res = await batch(token, [
      { op: 'tasks.create', ref: 'a', input: { task: { label: 'x', project_id: { ref: 'a' } } } },
      { op: 'tasks.list', input: {} },
      { op: 'projects.create', ref: 'a', input: { project: { name: 'X' } } },
      { op: 'tasks.update', ref: 'u', input: { id: { ref: 'nope' }, task: { label: 'y' } } },
      { op: 'tasks.changeState', input: { id: { ref: 'a' }, task: { state: 'finished' } } },
      { op: 'projects.create', ref: '', input: { project: { name: 'Y' } } },
      { op: 'projects.create', ref: 'r'.repeat(65), input: { project: { name: 'Z' } } },
      { input: {} },
      'not an operation',
      { op: 'tasks.reorder', input: { id: { ref: 7 }, task: { order: 1 } } },
    ]);
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: any) => [e.code, e.source?.pointer])).toEqual(expect.arrayContaining([
      ['invalid', '/operations/0/task/project_id'], // a task, not a project, and not earlier
      ['invalid', '/operations/1/op'],
      ['invalid', '/operations/2/ref'], // taken
      ['invalid', '/operations/3/ref'], // not a create
      ['invalid', '/operations/3/id'],
      ['invalid', '/operations/5/ref'],
      ['too_long', '/operations/6/ref'],
      ['parameter_missing', '/operations/7/op'],
      ['invalid', '/operations/8'],
      ['invalid', '/operations/9/id'],
    ]));
    expect(res.body.errors).toHaveLength(10);
    expect(await snapshot(id)).toEqual(before);
  });
});

describe('retries and limits', () => {
  it('replays a batch with the same Idempotency-Key, and refuses the key with another batch', async () => {
    const { id, token } = await app.register();
    const key = randomUUID();
    const operations = [
      { op: 'projects.create', ref: 'p', input: { project: { name: 'Once' } } },
      { op: 'tasks.create', input: { task: { label: 'once', project_id: { ref: 'p' } } } },
    ];
    const first = await batch(token, operations, { 'Idempotency-Key': key });
    expect(first.status).toBe(200);
    const after = await snapshot(id);
    const second = await batch(token, operations, { 'Idempotency-Key': key });
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect(await snapshot(id)).toEqual(after);
    const other = await batch(token, operations.slice(0, 1), { 'Idempotency-Key': key });
    expect(onlyError(other.body)).toMatchObject({ code: 'idempotency_key_reused' });
    // A failed batch whose rule ran (a state rule) is kept under its key too, and replayed.
    const failKey = randomUUID();
    const projectId = first.body.data[0].body.data.id as number;
    const failing = [{ op: 'projects.changeState', input: { id: projectId, project: { state: 'finished' } } }];
    const failed = await batch(token, failing, { 'Idempotency-Key': failKey });
    expect(onlyError(failed.body)).toMatchObject({ code: 'invalid_transition', source: { pointer: '/operations/0/project/state' } });
    const replayed = await batch(token, failing, { 'Idempotency-Key': failKey });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.text).toBe(failed.text);
    // A rule of the input that reads the database (a taken name) keeps nothing, as that request alone would not.
    const takenKey = randomUUID();
    const taken = await batch(token, [{ op: 'projects.create', input: { project: { name: 'Once' } } }], { 'Idempotency-Key': takenKey });
    expect(onlyError(taken.body)).toMatchObject({ code: 'taken', source: { pointer: '/operations/0/project/name' } });
    const renamed = await batch(token, [{ op: 'projects.create', input: { project: { name: 'Twice' } } }], { 'Idempotency-Key': takenKey });
    expect([renamed.status, renamed.headers.get('idempotent-replayed')]).toEqual([200, null]);
    // An operation whose input does not parse never ran, as that request alone would not have:
    // nothing is kept under the key, and the corrected batch runs with it.
    const fixKey = randomUUID();
    const refused = await batch(token, [
      { op: 'tasks.create', input: { task: { label: 'fine' } } },
      { op: 'tasks.create', input: { task: { label: '' } } },
    ], { 'Idempotency-Key': fixKey });
    expect(onlyError(refused.body)).toMatchObject({ code: 'invalid', source: { pointer: '/operations/1/task/label' } });
    const fixed = await batch(token, [
      { op: 'tasks.create', input: { task: { label: 'fine' } } },
      { op: 'tasks.create', input: { task: { label: 'fixed' } } },
    ], { 'Idempotency-Key': fixKey });
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
  });

  it('answers a key another request holds with 409 for the whole batch, no operation\'s pointer, on both doors', async () => {
    const { id, token } = await app.register();
    const key = randomUUID();
    const operations = [{ op: 'tasks.create', input: { task: { label: 'held' } } }];
    const lock = keyLock(id, key);
    await db.query('select pg_advisory_lock($1::bigint)', [lock]);
    try {
      const single = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label: 'held' } }, headers: { 'Idempotency-Key': key } });
      const held = await batch(token, operations, { 'Idempotency-Key': key });
      expect([held.status, onlyError(held.body).code]).toEqual([409, 'request_in_progress']);
      // The key's refusal is the request's, as a request alone gets it: no /operations/0.
      expect(held.body).toEqual(single.body);
      expect((onlyError(held.body).source as { pointer?: string } | undefined)?.pointer).toBeUndefined();
      const trpc = await app.trpc(token).batch.apply.mutate({ operations } as never, { context: { headers: { 'Idempotency-Key': key } } }).catch((e) => e);
      expect(trpc.data).toMatchObject({ code: 'request_in_progress', httpStatus: 409, errors: held.body.errors });
    } finally {
      await db.query('select pg_advisory_unlock($1::bigint)', [lock]);
    }
    const ran = await batch(token, operations, { 'Idempotency-Key': key });
    expect(ran.status).toBe(200);
  });

  it('answers a user deleted while its batch waited for the user\'s lock with 401, no operation\'s pointer', async () => {
    const { id, token } = await app.register();
    const deleting = new pg.Client({ connectionString: app.databaseUrl });
    await deleting.connect();
    try {
      await deleting.query('begin');
      await deleting.query('select 1 from users where id = $1 for update', [id]);
      // Authenticated, then waiting for the lock the deletion holds (as POST /api/users/me/deletion holds it).
      const pending = batch(token, [{ op: 'tasks.create', input: { task: { label: 'orphan' } } }]);
      await eventually(async () => (await db.query('select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid where not l.granted and a.datname = current_database()')).rows[0].n > 0, { message: 'the batch waits for the user\'s lock' });
      await deleting.query('delete from usernames where user_id = $1', [id]);
      await deleting.query('delete from users where id = $1', [id]);
      await deleting.query('commit');
      const res = await pending;
      expect([res.status, onlyError(res.body).code]).toEqual([401, 'unauthorized']);
      expect(onlyError(res.body).source).toBeUndefined();
    } finally {
      await deleting.end();
    }
  });

  it('serialises two batches of one user sent at once: orders stay dense, events stay in order', async () => {
    const { id, token } = await app.register();
    const creates = (label: string) => Array.from({ length: 20 }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `${label}${i}` } } }));
    const results = await Promise.all([batch(token, creates('a')), batch(token, creates('b')), batch(token, creates('c'))]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const orders = (await db.query('select "order" from tasks where user_id = $1 order by "order"', [id])).rows.map((r) => r.order);
    expect(orders).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    // Each batch's orders are consecutive: no other write came between its operations.
    for (const r of results) {
      const mine = r.body.data.map((d: any) => d.body.data.attributes.order);
      expect(mine).toEqual(Array.from({ length: 20 }, (_, i) => mine[0] + i));
    }
    const seqs = (await db.query('select seq from events where user_id = $1 order by seq', [id])).rows.map((r) => Number(r.seq));
    expect(seqs).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  });
});

describe('the tRPC door', () => {
  it('runs batch.apply with the same answers and the same error pointers', async () => {
    const { token } = await app.register();
    const client = app.trpc(token);
    const result = await client.batch.apply.mutate({
      operations: [
        { op: 'projects.create', ref: 'p', input: { project: { name: 'Typed' } } },
        { op: 'tasks.create', input: { task: { label: 'typed', project_id: { ref: 'p' } } } },
      ],
    });
    expect(result.data.map((r) => r.status)).toEqual([201, 201]);
    const rest = await app.request('GET', `/api/projects/${(result.data[0]!.body as any).data.id}`, { token });
    expect(rest.body.data.relationships.tasks.data).toEqual([{ type: 'task', id: (result.data[1]!.body as any).data.id }]);
    const error = await client.batch.apply.mutate({ operations: [{ op: 'projects.create', input: { project: { name: 'Typed' } } }] }).catch((e) => e);
    expect(error.data).toMatchObject({ code: 'taken', httpStatus: 422, errors: [expect.objectContaining({ source: { pointer: '/operations/0/project/name' } })] });
  });
});

describe('the rate limit', () => {
  const limited = useTestAppWithSql({ resetClock: true, rateLimits: { authPerMinute: 0, perMinute: 10 } });

  it('counts each operation as a request, and refuses a batch that would pass the limit before it runs', async () => {
    const { id, token } = await limited.app.register();
    const creates = (n: number) => Array.from({ length: n }, (_, i) => ({ op: 'tasks.create', input: { task: { label: `t${i}` } } }));
    const first = await limited.app.request('POST', BATCH, { token, body: { operations: creates(4) } });
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-remaining')).toBe('6');
    const over = await limited.app.request('POST', BATCH, { token, body: { operations: creates(7) } });
    expect(over.status).toBe(429);
    expect(onlyError(over.body)).toMatchObject({ code: 'rate_limited' });
    expect(over.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
    const tasks = await limited.db.query('select count(*)::int as n from tasks where user_id = $1', [id]);
    expect(tasks.rows[0].n).toBe(4);
  });
});
