/**
 * PATCH /api/projects/{id} (SPEC.md 4.3): the name (rules of creation), the description, or
 * `due_at` (project.entity.ts `changeDueAt`). Every problem found is answered at once.
 *
 * One statement when its snapshot is as fresh as the owner's lock (`FRESH`): the lock, the
 * project, the update under the conditions the entity's rules set (the name not another
 * project's; `due_at` its current value, or the project started and the date not before its
 * start), its event. When it changed nothing in a fresh snapshot, the same statement read
 * what the rules need, and `applyEdits` on a stand-in project says why; else the transaction
 * loads the project and applies the same edits.
 */
import type { z } from 'zod';
import { fromSeconds } from '../core/clock.js';
import { DomainError, ValidationErrors } from '../core/errors.js';
import { secondsOf } from '../db/sql-fragments.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { Project, slugOf } from './project.entity.js';
import type { ProjectState } from './project.lifecycle.js';
import { flushNamed, isNameTaken, takenName } from './project-name.js';
import { PROJECT_ROW_ANSWER, answerProject, findOwnedProject, type ProjectAnswer } from './project-answer.js';
import type { UpdateProjectInput } from './project.schema.js';
import { USER } from '../db/user-param.js';
import { versionIfChanged } from '../db/row-version.js';

type Input = z.infer<typeof UpdateProjectInput>;

/** The request's edits on `project`, all of them checked: throws every problem at once. */
function applyEdits(project: Project, edits: Input['project'], nameTaken: boolean): void {
  const { name, description, due_at } = edits;
  const problems = new ValidationErrors();
  if (name !== undefined) {
    if (nameTaken) problems.errors.push(...takenName().errors);
    else project.rename(name);
  }
  if (description !== undefined) project.description = description;
  if (due_at !== undefined) problems.collect(() => project.changeDueAt(due_at));
  problems.throwIfAny();
}

export const updateProject: UseCase<Input, ProjectAnswer> = {
  oneStatement(input, { resources }) {
    const { name, description, due_at } = input.project;
    const set: string[] = [];
    const setParams: unknown[] = [];
    const holds: string[] = [];
    const holdParams: unknown[] = [];
    if (name !== undefined) {
      set.push('name = ?', 'slug = ?');
      setParams.push(name, slugOf(name));
      holds.push(`not exists (select 1 from projects o where o.user_id = ${USER} and o.slug = ? and o.id <> prior.id)`);
      holdParams.push(slugOf(name));
    }
    if (description !== undefined) {
      set.push('description = ?');
      setParams.push(description);
    }
    if (due_at !== undefined) {
      // `changeDueAt`: the current value is no change; another needs a started project and a date not before its start.
      set.push(`due_at = case when ${secondsOf('prior.due_at')} = ? then projects.due_at else ?::timestamptz end`);
      setParams.push(due_at, fromSeconds(due_at));
      holds.push(`(${secondsOf('prior.due_at')} = ? or (prior.state = 'started' and prior.started_at is not null and prior.started_at <= ?::timestamptz))`);
      holdParams.push(due_at, fromSeconds(due_at));
    }
    // Nothing to edit still answers (and logs) the project as it is: a no-op set.
    if (set.length === 0) set.push('description = projects.description');
    // The version moves only when a column does: an edit to the values the project has keeps it.
    const version = versionIfChanged('projects', set, setParams);
    return {
      freshOnly: true,
      reads: { sql: `prior as (select p.* from projects p where p.id = ? and p.user_id = ${USER} and ${FRESH})`, params: [input.id] },
      changed: {
        sql: `update projects set ${set.join(', ')}, ${version.sql} from prior
               where projects.user_id = ${USER} and projects.id = prior.id${holds.map((h) => ` and ${h}`).join('')}
              returning projects.*`,
        params: [...setParams, ...version.params, ...holdParams],
      },
      events: [{ type: 'project.updated', document: resources.project.documentSql('changed', listedTaskIdsOf('changed')) }],
      ...PROJECT_ROW_ANSWER,
      refusal: {
        current: {
          sql: `(select json_build_object('state', p.state, 'startedAt', ${secondsOf('p.started_at')}, 'dueAt', ${secondsOf('p.due_at')},
                   'taken', exists (select 1 from projects o where o.user_id = ${USER} and o.slug = ? and o.id <> p.id))
                  from projects p where p.id = ? and p.user_id = ${USER})`,
          params: [slugOf(name ?? ''), input.id],
        },
        refuse(current) {
          if (current === null) throw DomainError.notFound('project');
          const { state, startedAt, dueAt, taken } = current as { state: ProjectState; startedAt: number; dueAt: number; taken: boolean };
          const project = Object.assign(new Project(), {
            state, startedAt: startedAt ? fromSeconds(startedAt) : null, dueAt: dueAt ? fromSeconds(dueAt) : null,
          });
          applyEdits(project, input.project, name !== undefined && taken);
        },
      },
    };
  },

  async transaction(scope, input) {
    const { em, userId } = scope;
    const project = await findOwnedProject(em, userId, input.id);
    const { name } = input.project;
    applyEdits(project, input.project, name !== undefined && (await isNameTaken(em, userId, name, project.id)));
    await flushNamed(em);
    return answerProject(scope, project);
  },
};
