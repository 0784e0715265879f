/**
 * A burst of one user's writes (docs/design/writes.md): each write function takes the user's
 * lock before its first read, and each of its statements sees everything committed before it,
 * so creations read the end of the user's order, and a creation in a project that project's
 * listed tasks, as every creation before them left them.
 */
import { describe, expect, it } from 'vitest';
import { useProcedures } from '../helpers/procedures.js';
import { DUE } from '../helpers/times.js';

const procedures = useProcedures();
const { register } = procedures;

describe('a burst of one user\'s writes', () => {
  it('40 parallel creations, half in a started project: orders 1..40, the last project event lists every task', async () => {
    const { id: userId, api } = await register();
    const project = (await api.projects.create({ project: { name: 'Burst' } })).data.id;
    await api.projects.changeState({ id: project, project: { state: 'started', due_at: DUE } });
    const created = await Promise.all(
      Array.from({ length: 40 }, (_, i) => api.tasks.create({ task: { label: `t${i}`, ...(i % 2 ? { project_id: project } : {}) } })),
    );
    const orders = created.map((c) => c.data.attributes.order).sort((a, b) => a - b);
    expect(orders).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const em = procedures.orm.em.fork();
    const inProject = await em.execute<Array<{ id: number }>>(
      `select id from tasks where user_id = ? and project_id = ? and state <> 'abandoned' order by "order", id`,
      [userId, project],
    );
    const [last] = await em.execute<Array<{ data: { relationships: { tasks: { data: Array<{ id: number }> } } } }>>(
      `select data from events where user_id = ? and type = 'project.updated' order by seq desc limit 1`,
      [userId],
    );
    expect(inProject).toHaveLength(20);
    expect(last!.data.relationships.tasks.data.map((t) => t.id)).toEqual(inProject.map((t) => t.id));
  });
});
