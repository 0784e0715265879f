/**
 * The task state machine of SPEC.md 3.2, as a table: the requested state and the current
 * state select the action (API-CONTRACT.md §4), and each action has its side effects.
 */
export const TASK_STATES = ['newed', 'started', 'planned', 'finished', 'abandoned'] as const;
export type TaskState = (typeof TASK_STATES)[number];

export interface TaskDates {
  startedAt?: Date | null;
  plannedAt?: Date | null;
  finishedAt?: Date | null;
  abandonedAt?: Date | null;
  plannedCount: number;
}

export interface TaskAction {
  action: 'start' | 'plan' | 'replan' | 'finish' | 'cancel' | 'abandon';
  from: readonly TaskState[];
  to: TaskState;
  apply(task: TaskDates, now: Date): void;
}

export const TASK_ACTIONS: readonly TaskAction[] = [
  {
    action: 'start', from: ['newed'], to: 'started',
    apply(task, now) {
      task.startedAt ??= now;
    },
  },
  {
    action: 'plan', from: ['newed', 'started'], to: 'planned',
    apply(task, now) {
      task.startedAt ??= now;
      task.plannedAt = now;
      task.plannedCount += 1;
    },
  },
  {
    action: 'replan', from: ['planned', 'finished'], to: 'planned',
    apply(task, now) {
      task.plannedAt = now;
      task.plannedCount += 1;
      task.finishedAt = null;
    },
  },
  {
    action: 'finish', from: ['planned'], to: 'finished',
    apply(task, now) {
      task.finishedAt = now;
    },
  },
  {
    action: 'cancel', from: ['started', 'planned'], to: 'newed',
    apply(task) {
      task.startedAt = null;
      task.plannedAt = null;
    },
  },
  {
    action: 'abandon', from: ['newed', 'started', 'planned'], to: 'abandoned',
    apply(task, now) {
      task.abandonedAt = now;
    },
  },
];

export function findTaskAction(from: TaskState, to: string): TaskAction | undefined {
  return TASK_ACTIONS.find((a) => a.to === to && a.from.includes(from));
}

/** States a task may be in when it is created, by SPEC.md 4.5. */
export function initialTaskState(input: { plannedAt: boolean; project: { started: boolean } | null }): TaskState {
  if (input.plannedAt) return 'planned';
  if (input.project && !input.project.started) return 'newed';
  return 'started';
}
