/**
 * Everything that can happen to a task's state, in one place (SPEC.md 3.2, 4.5;
 * API-CONTRACT.md §4–§6). Touch this file to change a task rule; nothing else decides one.
 *
 * TASK_ACTIONS is the state machine as a table. The five ways a task changes state all apply one of
 * its actions: a requested change (`findTaskAction`, `requestedActionSql`), creation (`NEW_TASK_RULES`),
 * joining or leaving a project (`PROJECT_SYNC_RULES`), its project starting, restarting or pausing
 * (project.lifecycle.ts), its project deleted (`PROJECT_DELETED`). `applyTaskAction` runs an action on
 * an object, `taskEffectsSql` on rows, from the same effects (test/rules/tasks-state-sql.test.ts).
 */
export const TASK_STATES = ['newed', 'started', 'planned', 'finished', 'abandoned'] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** The dated attributes of a task, by property and by column. */
export const TASK_DATE_COLUMNS = {
  startedAt: 'started_at',
  plannedAt: 'planned_at',
  finishedAt: 'finished_at',
  abandonedAt: 'abandoned_at',
} as const;
export type TaskDate = keyof typeof TASK_DATE_COLUMNS;

/** What an action does to one date: set it to now, set it to now unless set, or unset it. */
export type DateEffect = 'now' | 'nowIfUnset' | 'unset';

export type TaskDates = { [D in TaskDate]?: Date | null } & { plannedCount: number; state: TaskState };

export type TaskActionName = 'start' | 'plan' | 'replan' | 'finish' | 'cancel' | 'abandon';

export interface TaskAction {
  action: TaskActionName;
  from: readonly TaskState[];
  to: TaskState;
  dates: { readonly [D in TaskDate]?: DateEffect };
  /** plannedCount + 1. */
  counts?: true;
}

export const TASK_ACTIONS: readonly TaskAction[] = [
  { action: 'start', from: ['newed'], to: 'started', dates: { startedAt: 'nowIfUnset' } },
  { action: 'plan', from: ['newed', 'started'], to: 'planned', dates: { startedAt: 'nowIfUnset', plannedAt: 'now' }, counts: true },
  { action: 'replan', from: ['planned', 'finished'], to: 'planned', dates: { plannedAt: 'now', finishedAt: 'unset' }, counts: true },
  { action: 'finish', from: ['planned'], to: 'finished', dates: { finishedAt: 'now' } },
  { action: 'cancel', from: ['started', 'planned'], to: 'newed', dates: { startedAt: 'unset', plannedAt: 'unset' } },
  { action: 'abandon', from: ['newed', 'started', 'planned'], to: 'abandoned', dates: { abandonedAt: 'now' } },
];

/** The states that close a task: it leaves the user's open tasks (`users.open_tasks`, docs/design/writes.md 'The lock'). */
export const CLOSED_TASK_STATES: readonly TaskState[] = ['finished', 'abandoned'];

/** Whether a task in state `state` (a SQL expression) is open, as 1 or 0. */
export function openSql(state: string): string {
  return `(${state} not in (${CLOSED_TASK_STATES.map((s) => `'${s}'`).join(', ')}))::int`;
}

export function taskAction(name: TaskActionName): TaskAction {
  return TASK_ACTIONS.find((a) => a.action === name)!;
}

/** The action a requested state selects from the current one (API-CONTRACT.md §4). */
export function findTaskAction(from: TaskState, to: string): TaskAction | undefined {
  return TASK_ACTIONS.find((a) => a.to === to && a.from.includes(from));
}

/** Applies an action's effects to a task (whose state is one of `action.from`). */
export function applyTaskAction(task: TaskDates, action: TaskAction, now: Date): void {
  for (const [date, effect] of Object.entries(action.dates) as Array<[TaskDate, DateEffect]>) {
    if (effect === 'now') task[date] = now;
    else if (effect === 'nowIfUnset') task[date] ??= now;
    else task[date] = null;
  }
  if (action.counts) task.plannedCount += 1;
  task.state = action.to;
}

/**
 * SPEC.md 4.5 and API-CONTRACT.md §5: a task is born newed with nothing set, then takes the action
 * of the first row whose condition holds (null: it stays newed); a given `planned_at` is its plannedAt.
 */
export const NEW_TASK_RULES: ReadonlyArray<{ when: NewTaskCondition; action: TaskActionName | null }> = [
  { when: 'plannedAtGiven', action: 'plan' },
  { when: 'projectNotStarted', action: null },
  { when: 'always', action: 'start' },
];

export type NewTaskCondition = 'plannedAtGiven' | 'projectNotStarted' | 'always';

/** What a new task's conditions read: the given plannedAt, and the project it joins (null: none). */
export interface NewTaskFacts {
  plannedAt: Date | null;
  project: { started: boolean } | null;
}

const NEW_TASK_CONDITIONS: Record<NewTaskCondition, (facts: NewTaskFacts) => boolean> = {
  plannedAtGiven: (facts) => facts.plannedAt !== null,
  projectNotStarted: (facts) => facts.project !== null && !facts.project.started,
  always: () => true,
};

export function newTaskFields(input: NewTaskFacts, now: Date): TaskDates {
  const task: TaskDates = { state: 'newed', plannedCount: 0, startedAt: null, plannedAt: null, finishedAt: null, abandonedAt: null };
  const action = NEW_TASK_RULES.find((rule) => NEW_TASK_CONDITIONS[rule.when](input))!.action;
  if (action) applyTaskAction(task, taskAction(action), now);
  if (input.plannedAt) task.plannedAt = input.plannedAt;
  return task;
}

/** NEW_TASK_RULES in SQL: `plannedAt` the given one (or null), `projectStarted` null without a project, else a boolean. */
export function newTaskActionSql(plannedAt: string, projectStarted: string): string {
  const conditions: Record<NewTaskCondition, string> = {
    plannedAtGiven: `${plannedAt} is not null`,
    projectNotStarted: `${projectStarted} is not null and not ${projectStarted}`,
    always: 'true',
  };
  return `case ${NEW_TASK_RULES.map((rule) => `when ${conditions[rule.when]} then ${rule.action === null ? 'null' : `'${rule.action}'`}`).join(' ')} end`;
}

/** API-CONTRACT.md §5: a task that joins a project (or leaves every project) follows it; "running": started, or none. */
export const PROJECT_SYNC_RULES: ReadonlyArray<{ from: TaskState; projectRunning: boolean; action: TaskActionName }> = [
  { from: 'newed', projectRunning: true, action: 'start' },
  { from: 'started', projectRunning: false, action: 'cancel' },
];

export function projectSyncAction(state: TaskState, project: { started: boolean } | null): TaskAction | undefined {
  const projectRunning = project === null || project.started;
  const rule = PROJECT_SYNC_RULES.find((r) => r.from === state && r.projectRunning === projectRunning);
  return rule && taskAction(rule.action);
}

/** `projectSyncAction` in SQL: `state` the task's, `running` a boolean expression (no project, or a started one). */
export function projectSyncActionSql(state: string, running: string): string {
  return `case ${PROJECT_SYNC_RULES.map((r) => `when ${state} = '${r.from}' and ${r.projectRunning ? '' : 'not '}(${running}) then '${r.action}'`).join(' ')} end`;
}

/** What a project's change does to its tasks: an action, applied to its tasks in `states`. */
export interface ProjectTaskEffect {
  action: TaskActionName;
  states: readonly TaskState[];
}

/** API-CONTRACT.md §6: deleting a project abandons its tasks that can be (and detaches all). */
export const PROJECT_DELETED: ProjectTaskEffect = { action: 'abandon', states: taskAction('abandon').from };

const DATE_EFFECT_TEXT: Record<DateEffect, string> = { now: '= now', nowIfUnset: '= now if unset', unset: 'unset' };

/** TASK_ACTIONS as the lines of the task state change's description in openapi.json (`plannedAt = now, plannedCount + 1`). */
export function describeTaskActions(): string[] {
  return TASK_ACTIONS.map((a) => {
    const dates = Object.entries(a.dates) as Array<[TaskDate, DateEffect]>;
    const effects = dates.map(([date, effect]) => `${date} ${DATE_EFFECT_TEXT[effect]}`);
    if (a.counts) effects.push('plannedCount + 1');
    return `- ${a.action}: ${a.from.join('/')} → ${a.to} (${effects.join(', ')})`;
  });
}

/** TASK_ACTIONS' effects as SQL by column, for an UPDATE of `tasks`: a `case` over `action` (null keeps every value). */
export function taskEffectsSql(action: string, now: string): Record<string, string> {
  const set: Record<string, string> = {};
  for (const [date, column] of Object.entries(TASK_DATE_COLUMNS) as Array<[TaskDate, string]>) {
    const branches = TASK_ACTIONS.filter((a) => a.dates[date]).map((a) => {
      const effect = a.dates[date]!;
      const value = effect === 'now' ? now : effect === 'nowIfUnset' ? `coalesce(${column}, ${now})` : 'null';
      return `when '${a.action}' then ${value}`;
    });
    if (branches.length) set[column] = `case ${action} ${branches.join(' ')} else ${column} end`;
  }
  const counting = TASK_ACTIONS.filter((a) => a.counts).map((a) => `'${a.action}'`);
  set.planned_count = `case when ${action} in (${counting.join(', ')}) then planned_count + 1 else planned_count end`;
  set.state = `case ${action} ${TASK_ACTIONS.map((a) => `when '${a.action}' then '${a.to}'`).join(' ')} else state end`;
  return set;
}

/** `findTaskAction` in SQL: the action a row in state `from` takes to reach `to` (null when none). */
export function requestedActionSql(from: string, to: string): string {
  return `case ${TASK_ACTIONS.map((a) => `when ${to} = '${a.to}' and ${from} in (${a.from.map((s) => `'${s}'`).join(', ')}) then '${a.action}'`).join(' ')} end`;
}
