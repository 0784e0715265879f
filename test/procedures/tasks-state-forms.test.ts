/**
 * The forms of a task's state change (src/tasks/change-task-state.ts) agree: when the one
 * statement changed nothing but the transaction that follows finds the change allowed (a
 * write of the same user landed in between), the transaction makes it, with its event; when
 * it is still refused, the transaction says why and changes nothing.
 */
import { describe, expect, it } from 'vitest';
import type { AuthedContext } from '../../src/core/context.js';
import { DomainError } from '../../src/core/errors.js';
import { changeTaskState } from '../../src/tasks/change-task-state.js';
import { userWrite, type UseCase } from '../../src/writes/user-write.js';
import { useProcedures } from '../helpers/procedures.js';

const procedures = useProcedures();

type Input = Parameters<typeof changeTaskState.transaction>[1];

/** The use case, but its one statement changes nothing, as if another write had just changed the task. */
const oneStatementMissed: UseCase<Input, unknown> = {
  oneStatement: async (input, at) => ({ ...(await changeTaskState.oneStatement!(input, at))!, changed: { sql: 'select tasks.* from tasks, owner where false', params: [] } }),
  transaction: changeTaskState.transaction,
};

async function authedContext(user: { id: number; username: string; token: string }): Promise<AuthedContext> {
  const ctx = procedures.contextFor(user.token);
  const authentication = (await ctx.authenticate(user.token))!;
  return { ...ctx, ...authentication, call: { path: 'tasks.changeState', meta: { resource: 'task' }, rawInput: async () => ({}) } };
}

describe('a state change whose one statement changed nothing', () => {
  it('is made by the transaction when the task allows it now, with its event', async () => {
    const user = await procedures.register();
    const { data: task } = await user.api.tasks.create({ task: { label: 'Prune' } });
    const answer = (await userWrite(await authedContext(user), oneStatementMissed, { id: task.id, task: { state: 'planned' } })) as { data: { attributes: { state: string } } };
    expect(answer.data.attributes.state).toBe('planned');
    expect((await user.api.tasks.get({ id: task.id })).data.attributes.state).toBe('planned');
    const events = await user.api.events.list({ after: '0' });
    expect(events.data.map((e: { type: string }) => e.type)).toEqual(['task.created', 'task.updated']);
  });

  it('is refused by the transaction with the reason when the task still does not allow it, and changes nothing', async () => {
    const user = await procedures.register();
    const { data: task } = await user.api.tasks.create({ task: { label: 'Mow' } });
    const refused = await userWrite(await authedContext(user), oneStatementMissed, { id: task.id, task: { state: 'finished' } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect((refused as DomainError).errors).toEqual([expect.objectContaining({ code: 'invalid_transition', source: { pointer: '/task/state' } })]);
    expect((await user.api.tasks.get({ id: task.id })).data.attributes.state).toBe('started');
    expect((await user.api.events.list({ after: '0' })).data).toHaveLength(1);
  });

  it('is 404 when the user has no such task', async () => {
    const user = await procedures.register();
    const refused = await userWrite(await authedContext(user), oneStatementMissed, { id: 999_999, task: { state: 'planned' } }).catch((e: unknown) => e);
    expect((refused as DomainError).errors).toEqual([expect.objectContaining({ code: 'record_not_found' })]);
  });
});
