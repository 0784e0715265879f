/**
 * A task's document is written two ways: in TypeScript (presentTaskFields, the answers of
 * transactions) and in SQL (taskDocumentSql, the change log's event and the answer of a write
 * made in one statement). On rows in every state, with and without a project, with dates set
 * and unset and a label that needs escaping, both must give the same JSON, member for member
 * and in the same order.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { TASK_STATES } from '../../src/tasks/task.lifecycle.js';
import { presentedTaskColumns } from '../../src/tasks/task.sql.js';
import { presentTaskFields, taskDocumentSql, type TaskFields } from '../../src/tasks/task.view.js';
import { useProcedures } from '../helpers/procedures.js';

// The database only (no HTTP): a user and a project to own the rows, and the ORM to read them.
const app = useProcedures();
let userId: number;
let projectId: number;

beforeAll(async () => {
  const user = await app.register();
  userId = user.id;
  projectId = (await user.api.projects.create({ project: { name: 'Documents' } })).data.id;
});

const LABELS = ['plain', 'quote " backslash \\ newline \n tab \t', 'unicode é 日本 🎉', '</script>'];

describe('the SQL task document equals the TypeScript one', () => {
  it.each(TASK_STATES.flatMap((state) => [true, false].map((withDates) => [state, withDates] as const)))(
    '%s (dates set: %s)',
    async (state, withDates) => {
      for (const [i, label] of LABELS.entries()) {
        const dated = withDates ? `timestamptz '2026-06-0${i + 1} 10:00:00.75Z'` : 'null';
        const rows = await app.orm.em.fork().execute<Array<Record<string, unknown> & { document: unknown }>>(
          `with t as (
             insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
             values (?, ?, ?, (select coalesce(max("order"), 0) + 1 from tasks where user_id = ?), ?, ?, ${dated}, ${dated}, ${dated}, ${dated}, now())
             returning *
           )
           select ${presentedTaskColumns('t')}, ${taskDocumentSql('t')}::text as document from t`,
          [userId, i % 2 === 0 ? projectId : null, label, userId, i * 7, state],
        );
        const row = rows[0]!;
        const typescript = JSON.stringify(presentTaskFields(row as unknown as TaskFields));
        const sql = JSON.stringify(JSON.parse(row.document as string));
        expect(sql).toBe(typescript);
      }
    },
  );
});
