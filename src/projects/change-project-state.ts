/**
 * PUT /api/projects/{id}/state (SPEC.md 3.1, 4.4): the project moves along its state machine
 * (project.lifecycle.ts, applied by the entity: `Project.changeState`), and its tasks with it.
 * The owner's lock (taken first by every write) keeps the count of started projects true until
 * this one commits, across every server process.
 *
 * - One statement, for a request of only `state`, `due_at` and `finished_at`: the entity's own
 *   `changeState` is run on a stand-in project in each state the requested one can be reached
 *   from; each that accepts the request gives its move (`projectMoves`), and
 *   the statement makes the move of the project's state, its tasks' effect and their events,
 *   under the conditions that need the row (finished_at after its start, fewer than 3
 *   started). It reads the project and the count in its snapshot, so it changes nothing when a
 *   write of the user landed before it got the lock (`FRESH`): the transaction then runs. When
 *   it changed nothing in a fresh snapshot, the same statement read the project's state and
 *   the count, and the entity says why (`refusal`).
 * - The transaction, under the owner's lock, for every request: loads the project, applies the
 *   entity's `changeState`, and the tasks' effect in one statement (task.store.ts
 *   `applyToProjectTasks`, which returns them as changed: their events' documents).
 */
import type { z } from 'zod';
import { fromSeconds } from '../core/clock.js';
import { DomainError } from '../core/errors.js';
import { secondsOf } from '../db/sql-fragments.js';
import { FRESH, type UseCase } from '../writes/user-write.js';
import { applyToProjectTasks } from '../tasks/task.store.js';
import { listedTaskIdsOf } from '../tasks/task.sql.js';
import { taskAction, taskActionSql } from '../tasks/task.lifecycle.js';
import { presentTaskFields, taskDocumentSql } from '../tasks/task.view.js';
import { Project } from './project.entity.js';
import { MAX_STARTED_PROJECTS, PROJECT_STATES, type ProjectState, type ProjectTransition } from './project.lifecycle.js';
import { PROJECT_ROW_ANSWER, answerProject, findOwnedProject, type ProjectAnswer } from './project-answer.js';
import type { ChangeProjectStateInput } from './project.schema.js';
import { USER } from '../db/user-param.js';

type Input = z.infer<typeof ChangeProjectStateInput>;

const DATES = { startedAt: 'started_at', dueAt: 'due_at', pausedAt: 'paused_at', finishedAt: 'finished_at' } as const;
type DateName = keyof typeof DATES;
const REQUEST_MEMBERS = new Set(['state', 'due_at', 'finished_at']);

/** A move the request makes from one state: its transition and the dates it writes. */
interface Move {
  transition: ProjectTransition;
  dates: Partial<Record<DateName, Date | null>>;
}

/** A project as the entity's rules see it, with no date set (`undefined`: what `apply` writes shows). */
function standIn(state: ProjectState, startedAt?: Date): Project {
  return Object.assign(new Project(), { state, startedAt, dueAt: undefined, pausedAt: undefined, finishedAt: undefined });
}

/**
 * The moves the request makes, by the state it starts from: the entity's `changeState` on a
 * stand-in in each state (no start date, none of the user's projects started), kept where it
 * accepts. What the row decides (finished_at not before its start, the started limit) is
 * left to the statement.
 */
async function projectMoves(request: Input['project'], now: Date, timeZone: string): Promise<Map<ProjectState, Move>> {
  const moves = new Map<ProjectState, Move>();
  for (const state of PROJECT_STATES) {
    const project = standIn(state);
    try {
      const transition = await project.changeState(request, { now, timeZone, startedProjects: async () => 0 });
      const dates: Move['dates'] = {};
      for (const name of Object.keys(DATES) as DateName[]) if (project[name] !== undefined) dates[name] = project[name] ?? null;
      moves.set(state, { transition, dates });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
    }
  }
  return moves;
}

export const changeProjectState: UseCase<Input, ProjectAnswer> = {
  async oneStatement(input, { now, timeZone, resources }) {
    const request = input.project;
    if (Object.keys(request).some((member) => !REQUEST_MEMBERS.has(member))) return null;
    const moves = await projectMoves(request, now, timeZone);
    const effects = new Set([...moves.values()].map((m) => JSON.stringify(m.transition.tasks)));
    if (effects.size > 1) return null; // moves with different effects on tasks: the transaction
    const effect = [...moves.values()][0]?.transition.tasks ?? null;
    const finishedAt = request.finished_at === undefined ? undefined : fromSeconds(request.finished_at);

    // The state every move reaches (a name of the table, not the request's text: a request no
    // move accepts changes nothing), and each date the value its move writes, by the state it
    // moves from; else it stays.
    const to = [...moves.values()][0]?.transition.to;
    const setParams: unknown[] = [];
    const set = [to ? `state = '${to}'` : 'state = projects.state'];
    for (const [name, column] of Object.entries(DATES) as Array<[DateName, string]>) {
      const arms = [...moves].filter(([, move]) => name in move.dates).map(([from, move]) => {
        setParams.push(move.dates[name]);
        return `when prior.state = '${from}' then ?::timestamptz`;
      });
      // The searched form (`case when x = 'a'`): Citus 13.2, planning this statement inside a
      // transaction, rewrites the simple form (`case x when 'a'`) into one PostgreSQL refuses.
      if (arms.length) set.push(`${column} = case ${arms.join(' ')} else projects.${column} end`);
    }
    // What the row decides, per move: finished_at not before its start; the started limit.
    const allowedParams: unknown[] = [];
    const allowed = [...moves].map(([from, { transition }]) => {
      const holds = [`prior.state = '${from}'`];
      if (finishedAt) {
        holds.push('(prior.started_at is null or prior.started_at <= ?::timestamptz)');
        allowedParams.push(finishedAt);
      }
      if (transition.countsAsStarted) {
        holds.push(`(select count(*) from projects s where s.user_id = ${USER} and s.state = 'started') < ${MAX_STARTED_PROJECTS}`);
      }
      return `(${holds.join(' and ')})`;
    }).join(' or ') || 'false';
    const tasks = effect && taskActionSql(taskAction(effect.action), now, effect.states);
    return {
      freshOnly: true,
      reads: {
        sql: `prior as (select p.* from projects p where p.id = ? and p.user_id = ${USER} and ${FRESH})${
          tasks
            ? `, moved as (
                update tasks set ${tasks.set}, version = tasks.version + 1
                 where tasks.user_id = ${USER} and tasks.project_id = (select id from prior)
                   and tasks.state = any('{${effect!.states.join(',')}}'::text[])
                   and exists (select 1 from prior where ${allowed})
                returning tasks.*)`
            : ''
        }`,
        params: [input.id, ...(tasks ? [...tasks.params, ...allowedParams] : [])],
      },
      changed: {
        sql: `update projects set ${set.join(', ')}, version = projects.version + 1 from prior
               where projects.user_id = ${USER} and projects.id = prior.id and (${allowed})
              returning projects.*`,
        params: [...setParams, ...allowedParams],
      },
      events: [
        { type: 'project.updated', document: resources.project.documentSql('changed', listedTaskIdsOf('changed')) },
        ...(tasks ? [{ type: 'task.updated' as const, document: taskDocumentSql('moved'), from: 'moved', orderBy: 'moved."order", moved.id' }] : []),
      ],
      ...PROJECT_ROW_ANSWER,
      refusal: {
        current: {
          sql: `(select json_build_object('state', p.state, 'startedAt', ${secondsOf('p.started_at')},
                   'started', (select count(*) from projects s where s.user_id = ${USER} and s.state = 'started'))
                  from projects p where p.id = ? and p.user_id = ${USER})`,
          params: [input.id],
        },
        async refuse(current) {
          if (current === null) throw DomainError.notFound('project');
          const { state, startedAt, started } = current as { state: ProjectState; startedAt: number; started: number };
          // The entity says why; when it would allow the move now, the transaction decides.
          await standIn(state, startedAt ? fromSeconds(startedAt) : undefined).changeState(request, { now, timeZone, startedProjects: async () => started });
        },
      },
    };
  },

  async transaction(scope, input) {
    const { em, userId, now, timeZone, changes } = scope;
    const project = await findOwnedProject(em, userId, input.id);
    const transition = await project.changeState(input.project, {
      now,
      timeZone,
      startedProjects: () => em.count(Project, { userId, state: 'started' }),
    });
    await em.flush();
    changes.updated('project', project.id); // first: its tasks' events follow it, by order
    if (transition.tasks) {
      const tasks = await applyToProjectTasks(em, userId, project.id, transition.tasks, now);
      for (const task of tasks.sort((a, b) => a.order - b.order || a.id - b.id)) changes.updated('task', task.id, presentTaskFields(task));
    }
    return answerProject(scope, project);
  },
};
