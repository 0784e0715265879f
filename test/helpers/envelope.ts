/**
 * What the API answers, as the tests expect it: the error envelope of API-CONTRACT.md §2
 * and the project and task resources of SPEC.md 2.1–2.2 (API-CONTRACT.md §6).
 */
import { expect } from 'vitest';
import { STABILITY_META } from '../../src/core/envelope.js';
import { TASK_STATES, type TaskState } from '../../src/tasks/task.lifecycle.js';
import type { ApiResponse } from './http.js';

export const META = STABILITY_META;
export const JSON_CT = 'application/json; charset=utf-8';

export interface Source {
  pointer?: string;
  parameter?: string;
}

/** What one error of the envelope must equal: its status and code, a title and a detail, the source if given. */
export function errorShape(status: number, code: string, source?: Source): Record<string, unknown> {
  const error: Record<string, unknown> = {
    status: String(status),
    code,
    title: expect.stringMatching(/\S/),
    detail: expect.stringMatching(/\S/),
  };
  if (source) error.source = source;
  return error;
}

/** Asserts the exact envelope of API-CONTRACT.md §2 with a single error. */
export function expectError(res: ApiResponse, status: number, code: string, source?: Source) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe(JSON_CT);
  expect(res.body).toEqual({ errors: [errorShape(status, code, source)] });
}

/** Asserts a 422 with exactly these [code, pointer] errors, in any order. */
export function expectErrors(res: ApiResponse, expected: Array<[string, string]>) {
  expect(res.status, res.text).toBe(422);
  expect(Object.keys(res.body)).toEqual(['errors']);
  for (const e of res.body.errors) {
    expect(e).toEqual({
      status: '422',
      code: expect.any(String),
      title: expect.stringMatching(/\S/),
      detail: expect.stringMatching(/\S/),
      source: { pointer: expect.any(String) },
    });
  }
  const actual = res.body.errors.map((e: any) => [e.code, e.source.pointer] as [string, string]);
  const sort = (list: Array<[string, string]>) => [...list].sort((a, b) => (a.join(' ') < b.join(' ') ? -1 : 1));
  expect(sort(actual)).toEqual(sort(expected));
}

export type ProjectState = 'newed' | 'started' | 'paused' | 'finished';

export interface ProjectExpectation {
  id: number;
  userId: number;
  name: string;
  description?: string;
  state?: ProjectState;
  startedAt?: number;
  dueAt?: number;
  pausedAt?: number;
  finishedAt?: number;
  tasks?: number[];
}

/** A project resource as SPEC.md 2.1 and API-CONTRACT.md §6 describe it; unset timestamps are 0. */
export function projectJson(p: ProjectExpectation) {
  const state = p.state ?? 'newed';
  return {
    type: 'project',
    id: p.id,
    attributes: {
      name: p.name,
      slug: p.name.toLowerCase(),
      description: p.description ?? '',
      state,
      startedAt: p.startedAt ?? 0,
      dueAt: p.dueAt ?? 0,
      pausedAt: p.pausedAt ?? 0,
      finishedAt: p.finishedAt ?? 0,
      isInProgress: state === 'started',
    },
    relationships: {
      user: { data: { type: 'user', id: p.userId } },
      tasks: { data: (p.tasks ?? []).map((id) => ({ type: 'task', id })) },
    },
  };
}

export function projectDoc(p: ProjectExpectation) {
  return { data: projectJson(p), meta: META };
}

export { TASK_STATES, type TaskState };

export interface TaskExpectation {
  id: number;
  userId: number;
  label: string;
  order: number;
  state: TaskState;
  plannedCount?: number;
  startedAt?: number;
  plannedAt?: number;
  finishedAt?: number;
  abandonedAt?: number;
  /** No project when null or left out. */
  projectId?: number | null;
}

/** A task resource as SPEC.md 2.2 describes it; unset timestamps are 0. */
export function taskJson(t: TaskExpectation) {
  return {
    type: 'task',
    id: t.id,
    attributes: {
      label: t.label,
      order: t.order,
      plannedCount: t.plannedCount ?? 0,
      state: t.state,
      startedAt: t.startedAt ?? 0,
      plannedAt: t.plannedAt ?? 0,
      finishedAt: t.finishedAt ?? 0,
      abandonedAt: t.abandonedAt ?? 0,
    },
    relationships: {
      user: { data: { type: 'user', id: t.userId } },
      project: { data: t.projectId == null ? null : { type: 'project', id: t.projectId } },
    },
  };
}

export function taskDoc(t: TaskExpectation) {
  return { data: taskJson(t), meta: META };
}

/** The expectation a response's task resource corresponds to, to build on with overrides. */
export function taskExpectationOf(resource: any): TaskExpectation {
  const a = resource.attributes;
  return {
    id: resource.id,
    userId: resource.relationships.user.data.id,
    label: a.label,
    order: a.order,
    state: a.state,
    plannedCount: a.plannedCount,
    startedAt: a.startedAt,
    plannedAt: a.plannedAt,
    finishedAt: a.finishedAt,
    abandonedAt: a.abandonedAt,
    projectId: resource.relationships.project.data?.id ?? null,
  };
}

/** The answer of a reorder: [id, order] of every task that moved, by order. */
export function orderDoc(pairs: Array<[number, number]>) {
  return { data: pairs.map(([id, order]) => ({ type: 'task', id, attributes: { order } })), meta: META };
}
