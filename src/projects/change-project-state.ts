/**
 * PUT /api/projects/{id}/state (SPEC.md 3.1, 4.4; API-CONTRACT.md §4): the operation's function, made from
 * PROJECT_TRANSITIONS. The project (404), If-Match (412), the rules in Project.changeState's order, stopping
 * at the first (the user's day is `p_day`); then the transition's effects on the project and its tasks.
 */
import { compileStatement, sql, v } from '../db/sql-builder.js';
import { taskEffectsSql } from '../tasks/task.lifecycle.js';
import { taskSql } from '../tasks/task.sql.js';
import { taskDocumentSql } from '../tasks/task.view.js';
import { pointerSegmentSql } from '../writes/operation-sql.js';
import { refusalSql, text, type WriteOperation } from '../writes/write-functions.js';
import { MAX_STARTED_PROJECTS, PROJECT_TRANSITIONS, projectDateEffectSql, type ProjectDates, type ProjectTransition } from './project.lifecycle.js';
import { PROJECT_VARIABLES, READ_PROJECT, RETURN_PROJECT, projectEventSql, projectSql, rawColumns } from './project.write-sql.js';

/** Each date's column, and the request's date its `given…` effect reads. */
const DATES: Record<keyof ProjectDates, [column: string, given: string]> = {
  startedAt: ['started_at', 'null'], dueAt: ['due_at', 'v_due'], pausedAt: ['paused_at', 'null'], finishedAt: ['finished_at', 'v_finished'],
};

/** The actions (as a SQL list) of the transitions `holds` keeps. */
const actions = (holds: (t: ProjectTransition) => boolean) => PROJECT_TRANSITIONS.filter(holds).map((t) => text(t.action)).join(', ') || 'null';

/** A `case` over `v_transition`, each branch what `of` says of its transition (skipped when undefined). */
function byTransition(of: (t: ProjectTransition) => string | undefined, otherwise: string): string {
  const branches = PROJECT_TRANSITIONS.flatMap((t) => {
    const value = of(t);
    return value === undefined ? [] : [`when ${text(t.action)} then ${value}`];
  });
  return branches.length ? `case v_transition ${branches.join(' ')} else ${otherwise} end` : otherwise;
}

export function changeProjectStateOperation(): WriteOperation {
  const dates = Object.fromEntries((Object.keys(DATES) as Array<keyof ProjectDates>).map((date) => {
    const [column, given] = DATES[date];
    const effect = (t: ProjectTransition) => t.dates[date] && projectDateEffectSql(t.dates[date], { given, now: 'p_now', current: column });
    return [column, byTransition(effect, column)];
  }));
  const move = projectSql
    .updateTable('projects')
    .set(rawColumns({ ...dates, state: byTransition((t) => text(t.to), 'state'), version: 'version + 1' }))
    .where('user_id', '=', v<number>('p_user'))
    .where('id', '=', v<number>('v_project.id'))
    .returningAll();
  const tasks = taskSql
    .updateTable('tasks')
    .set(rawColumns({ ...taskEffectsSql('v_task_action', 'p_now'), version: 'version + 1' }))
    .where('user_id', '=', v<number>('p_user'))
    .where('project_id', '=', v<number>('v_project.id'))
    .where(sql.raw<boolean>('state = any(v_task_states)'))
    .returningAll();
  const refuse = (code: string, pointer: string, detail: string) => refusalSql({ code, pointer: text(pointer), detail });
  return {
    op: 'projects.changeState',
    fn: 'projects_change_state',
    body: `declare
  ${PROJECT_VARIABLES}
  v_to text := p_input->'project'->>'state';
  v_transition text;
  v_member text;
  v_due timestamptz := to_timestamp((p_input->'project'->>'due_at')::float8);
  v_finished timestamptz := to_timestamp((p_input->'project'->>'finished_at')::float8);
  v_task_action text;
  v_task_states text[];
  v_events json[];
begin
  ${READ_PROJECT}
  v_transition := case ${PROJECT_TRANSITIONS.map((t) => `when v_project.state = ${text(t.from)} and v_to = ${text(t.to)} then ${text(t.action)}`).join(' ')} end;
  if v_transition is null then
    ${refuse('invalid_transition', '/project/state', `'A ' || v_project.state || ' project cannot become ' || v_to || '.'`)}
  end if;
  if (p_input->'project')::jsonb - array['state', 'due_at', 'finished_at'] <> '{}'::jsonb then
    select m into v_member from json_object_keys(p_input->'project') as m where m not in ('state', 'due_at', 'finished_at') limit 1;
    ${refusalSql({ code: 'cannot_be_set', pointer: `'/project/' || ${pointerSegmentSql('v_member')}`, detail: `v_member || ' cannot be set when changing the state.'` })}
  end if;
  if v_due is not null and v_transition in (${actions((t) => t.dueAt === 'forbidden')}) then
    ${refuse('cannot_be_set', '/project/due_at', `'due_at cannot be set on ' || v_transition || '.'`)}
  end if;
  if v_finished is not null and v_transition in (${actions((t) => t.finishedAt === 'forbidden')}) then
    ${refuse('cannot_be_set', '/project/finished_at', `'finished_at cannot be set on ' || v_transition || '.'`)}
  end if;
  if v_due is null and v_transition in (${actions((t) => t.dueAt === 'required')}) then
    ${refuse('must_be_set', '/project/due_at', `'due_at must be set on ' || v_transition || '.'`)}
  end if;
  if v_due < (p_day->>'next')::timestamptz then
    ${refuse('cannot_be_before_started_at', '/project/due_at', text('due_at must be after today.'))}
  end if;
  if v_finished < v_project.started_at then
    ${refuse('cannot_be_before_started_at', '/project/finished_at', text('finished_at cannot be before the project started.'))}
  end if;
  if v_finished > (p_day->>'end')::timestamptz then
    ${refuse('cannot_be_after_today', '/project/finished_at', text('finished_at cannot be after today.'))}
  end if;
  if v_transition in (${actions((t) => t.countsAsStarted)})
     and (select count(*) from projects p where p.user_id = p_user and p.state = 'started') >= ${MAX_STARTED_PROJECTS} then
    ${refuse('reached_max_started', '/project/state', text(`At most ${MAX_STARTED_PROJECTS} projects can be started at the same time.`))}
  end if;
  ${compileStatement(move, projectSql)} into v_project;
  ${projectEventSql('updated')}
  v_task_action := ${byTransition((t) => t.tasks?.action && text(t.tasks.action), 'null')};
  v_task_states := ${byTransition((t) => (t.tasks ? `array[${t.tasks.states.map(text).join(', ')}]` : undefined), 'null')};
  if v_task_action is not null then
    with moved as (${compileStatement(tasks, taskSql)})
    select v_events || coalesce(array_agg(json_build_object('type', 'task.updated', 'data', ${taskDocumentSql('moved')}) order by moved."order", moved.id), '{}')
      into v_events from moved;
  end if;
  ${RETURN_PROJECT}
end`,
  };
}
