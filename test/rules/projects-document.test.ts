/**
 * A project's document is written two ways: in TypeScript (presentProjectFields, the answers
 * of transactions and reads) and in SQL (projectDocumentSql, the change log's event of a write
 * made in one statement, such as a task created in the project). On rows in every state, with
 * dates set and unset, a description that needs escaping, and no, one or several listed tasks,
 * both must give the same JSON, member for member and in the same order.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_STATES } from '../../src/projects/project.lifecycle.js';
import { projectsByIds } from '../../src/projects/project.store.js';
import { presentProjectFields, projectDocumentSql } from '../../src/projects/project.view.js';
import { listedTaskIdsOf } from '../../src/tasks/task.sql.js';
import { useProcedures } from '../helpers/procedures.js';

const app = useProcedures();
let userId: number;

beforeAll(async () => {
  userId = (await app.register()).id;
});

const DESCRIPTIONS = ['', 'quote " backslash \\ newline \n tab \t', 'unicode é 日本 🎉', '</script>'];

describe('the SQL project document equals the TypeScript one', () => {
  it.each(PROJECT_STATES.flatMap((state) => [true, false].map((withDates) => [state, withDates] as const)))(
    '%s (dates set: %s)',
    async (state, withDates) => {
      for (const [i, description] of DESCRIPTIONS.entries()) {
        const em = app.orm.em.fork();
        const dated = withDates ? `timestamptz '2026-06-0${i + 1} 10:00:00.75Z'` : 'null';
        const name = `P_${state}_${withDates}_${i}`;
        const [row] = await em.execute<Array<{ id: number; document: string }>>(
          `with p as (
             insert into projects (user_id, name, slug, description, state, started_at, due_at, paused_at, finished_at, created_at)
             values (?, ?, lower(?), ?, ?, ${dated}, ${dated}, ${dated}, ${dated}, now())
             returning *
           )
           select p.id, ${projectDocumentSql('p', "'{}'::int[]")}::text as document from p`,
          [userId, name, name, description, state],
        );
        // i listed tasks (and one abandoned, which the document leaves out), in an order that is not their ids'.
        for (let k = 0; k < i; k++) {
          await em.execute(
            `insert into tasks (user_id, project_id, label, "order", state, created_at)
             values (?, ?, 't', (select coalesce(max("order"), 0) + 1 from tasks where user_id = ?), ?, now())`,
            [userId, row!.id, userId, k === 1 ? 'abandoned' : 'newed'],
          );
        }
        if (i > 2) await em.execute(`update tasks set "order" = "order" + 1000 where user_id = ? and project_id = ? and id = (select min(id) from tasks where project_id = ?)`, [userId, row!.id, row!.id]);
        const [withTasks] = await em.execute<Array<{ document: string }>>(
          `select ${projectDocumentSql('p', listedTaskIdsOf('p', '?'))}::text as document from projects p where p.user_id = ? and p.id = ?`,
          [userId, userId, row!.id],
        );
        const [fields] = await projectsByIds(em, userId, [row!.id]);
        const typescript = JSON.stringify(presentProjectFields(fields!));
        expect(JSON.stringify(JSON.parse(withTasks!.document))).toBe(typescript);
        if (i === 0) expect(JSON.stringify(JSON.parse(row!.document))).toBe(typescript);
      }
    },
  );
});
