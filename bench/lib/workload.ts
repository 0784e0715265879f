/**
 * The seeded data of the throughput and CPU scenarios and the request scripts they send over
 * it (bench/README.md, "What one run does" and its table of scenarios): bench_main with 10,000
 * tasks, 50 other users with 1,000 each, bench_in_project (1,000 tasks over 10 projects, the
 * first started) whose started project gets the creates of one user, growth users with 1k,
 * 10k and 100k; the task and project pools the writes flip, with their states re-read from the
 * database before a slice.
 */
import type pg from 'pg';
import { mulberry32 } from '../../test/helpers/prng.js';
import type { BenchRequest, Script } from './load.js';
import { createTask, flipTaskStates, readStates } from './scripts.js';
import { seedMainUser, seedUser, taskIdsByOrder, type SeededUser } from './seed.js';

/** Tasks on a page of the list (TASK_PAGE_SIZE). */
export const PAGE = 50;

export interface World {
  main: SeededUser;
  /** bench_other_0 … bench_other_49. */
  others: SeededUser[];
  growth: Array<[string, SeededUser]>;
  /**
   * bench_in_project: 1,000 tasks over 10 projects, the first (`project`) started with a due
   * date a year ahead and its 100 tasks started, as a start through the API leaves them. Only
   * the in-project creates load it; `resetInProject` deletes every task above the seeded
   * `tasks` orders, so each slice starts from the same project.
   */
  inProject: { user: SeededUser; project: number };
  /** Deletes the tasks created in bench_in_project since the seed (orders above its 1,000). */
  resetInProject(): Promise<void>;
  /** Users seeded. */
  users: number;
  totalTasks: number;
  /** bench_main's 3,000 planned tasks (orders 1–3,000), flipped finished ⇄ planned. */
  plannedPool: number[];
  /** bench_main's tasks at orders 4,901–5,100: get task and the reorder window. */
  middle: number[];
  /** Pages of bench_main's list (its 9,500 listed tasks). */
  mainPages: number;
  /** Each other user's first 320 tasks (all newed), flipped started ⇄ newed. */
  otherPools: number[][];
  /** Unix seconds a year ahead: the due date of a project start. */
  farDue: number;
  /** The flipped tasks' states, as the scripts last sent them. */
  taskStates: Map<number, string>;
  /** The flipped projects' states, likewise. */
  projectStates: Map<number, string>;
  /** Re-reads the flipped tasks' states (before a slice that flips them). */
  loadTaskStates(): Promise<void>;
  /** Re-reads the flipped projects' states. */
  loadProjectStates(): Promise<void>;
}

/** Seeds the users (bulk SQL, then vacuum analyze) and reads the pools the scripts use. */
export async function seedWorld(admin: pg.Client): Promise<World> {
  const main = await seedMainUser(admin);
  const others: SeededUser[] = [];
  for (let i = 0; i < 50; i++) others.push(await seedUser(admin, `bench_other_${i}`, 1_000, 10));
  const growth: Array<[string, SeededUser]> = [
    ['1k', await seedUser(admin, 'bench_g1k', 1_000, 0)],
    ['10k', await seedUser(admin, 'bench_g10k', 10_000, 0)],
    ['100k', await seedUser(admin, 'bench_g100k', 100_000, 0)],
  ];
  const farDue = Math.floor(Date.now() / 1000) + 365 * 86_400;
  const inProjectUser = await seedUser(admin, 'bench_in_project', 1_000, 10);
  const inProject = { user: inProjectUser, project: inProjectUser.projects[0]! };
  // What a start does (project.lifecycle.ts): the project started with its due date, its newed
  // tasks started (started_at set where unset); the versions move through the row trigger.
  await admin.query(`update projects set state = 'started', started_at = now(), due_at = to_timestamp($3) where user_id = $1 and id = $2`, [inProjectUser.id, inProject.project, farDue]);
  await admin.query(
    `update tasks set state = 'started', started_at = coalesce(started_at, now()) where user_id = $1 and project_id = $2 and state = 'newed'`,
    [inProjectUser.id, inProject.project],
  );
  // The fewest floor counts a user's open tasks through this partial index (its writes keep no
  // counter on the user's row); the service reads users.open_tasks, never this index, and so
  // only pays its upkeep here (its migrations dropped it).
  await admin.query(`create index if not exists tasks_open_by_user on tasks (user_id) where state not in ('abandoned', 'finished')`);
  await admin.query('vacuum analyze');
  const totalTasks = Number((await admin.query<{ n: string }>('select count(*) as n from tasks')).rows[0]!.n);
  const plannedPool = await taskIdsByOrder(admin, main.id, 1, 3_000);
  const middle = await taskIdsByOrder(admin, main.id, 4_901, 5_100);
  const otherPools: number[][] = [];
  for (const u of others) otherPools.push(await taskIdsByOrder(admin, u.id, 1, 320)); // one client: one query at a time
  const taskStates = new Map<number, string>();
  const projectStates = new Map<number, string>();
  const flipped = [...plannedPool, ...otherPools.flat()];
  const flipProjects = others.map((u) => u.projects[0]!);
  return {
    main,
    others,
    growth,
    inProject,
    resetInProject: async () => {
      await admin.query('delete from tasks where user_id = $1 and "order" > $2', [inProjectUser.id, inProjectUser.tasks]);
      await admin.query('update users set next_task_order = $2 where id = $1', [inProjectUser.id, inProjectUser.tasks + 1]);
    },
    users: 2 + others.length + growth.length,
    totalTasks,
    plannedPool,
    middle,
    mainPages: Math.ceil((10_000 - 300 - 200) / PAGE),
    otherPools,
    farDue,
    taskStates,
    projectStates,
    loadTaskStates: () => readStates(admin, 'tasks', flipped, taskStates),
    loadProjectStates: () => readStates(admin, 'projects', flipProjects, projectStates),
  };
}

/** Page 1, 2, … `pages`, 1, … of the user's tasks (one counter over all connections). */
export function listTasks(user: SeededUser, pages: number): Script {
  let i = 0;
  return () => () => ({ method: 'GET', path: `/api/users/me/tasks?page=${1 + (i++ % pages)}`, token: user.token });
}

/** The same pages through the tRPC door: `GET /trpc/tasks.list?input=` the superjson envelope, URL-encoded. */
export function listTasksTrpc(user: SeededUser, pages: number): Script {
  let i = 0;
  const input = (page: number) => encodeURIComponent(JSON.stringify({ json: { page } }));
  return () => () => ({ method: 'GET', path: `/trpc/tasks.list?input=${input(1 + (i++ % pages))}`, token: user.token });
}

export function listProjects(user: SeededUser, pages: number): Script {
  let i = 0;
  return () => () => ({ method: 'GET', path: `/api/users/me/projects?page=${1 + (i++ % pages)}`, token: user.token });
}

/**
 * A task of the window to another place in the window, drawn from a seeded generator:
 * (task, place) pairs do not repeat in cycles, so almost every request moves its task
 * (on average by a third of the window).
 */
export function reorderIn(user: SeededUser, ids: number[], lowest: number, seed = 1): Script {
  const random = mulberry32(seed);
  return () => () => ({
    method: 'PUT',
    path: `/api/tasks/${ids[Math.floor(random() * ids.length)]}/order`,
    token: user.token,
    body: { task: { order: lowest + Math.floor(random() * ids.length) } },
  });
}

/** Out of every 100 requests of a connection in the mixed scenario. */
export const MIX = { listTasks: 35, listProjects: 20, getTask: 15, create: 10, changeState: 10, reorder: 10 };

/**
 * The scripts of one world and connection count. The lists and the reorder are not here:
 * each slice takes a fresh one of `listTasks`, `listProjects`, `reorderIn` (from page 1, from
 * the seed), so that the targets in turns get the same requests.
 */
export interface Scripts {
  getTask: Script;
  /** Creates for bench_main, labelled `bench task N`. */
  createMain: Script;
  /** bench_main's planned pool, finished ⇄ planned (load the task states first). */
  changeState: Script;
  /** The 50 users' pools, started ⇄ newed (load the task states first). */
  changeStateSpread: Script;
  createSpread: Script;
  /** Creates in bench_in_project's started project, every connection as that one user (reset it first). */
  createInProject: Script;
  /** Connection c flips the first project of other user c (load the project states first). */
  startPause: Script;
  /** `MIX` per 100 requests (load the task states first). */
  mixed: Script;
}

/** The scripts over the world, for `connections` connections (the pools are split between them). */
export function scriptsOf(world: World, connections: number): Scripts {
  const { main, others, otherPools, middle, taskStates, projectStates, farDue, mainPages } = world;
  let created = 0;
  const createMain = createTask(main.token, () => `bench task ${++created}`);
  const changeState = flipTaskStates(world.plannedPool, taskStates, main.token, connections);
  /**
   * Over the 50 users: connection c at its k-th request changes a task of user (c + k) mod 50,
   * so the connections work on different users; it owns the tasks at indexes ≡ c (mod
   * connections) of each user's pool, so no two requests race on a task.
   */
  const changeStateSpread: Script = (connection) => {
    const own: Array<[SeededUser, number]> = [];
    for (let i = connection; i < 320; i += connections) {
      for (let u = 0; u < others.length; u++) {
        const user = (u + connection) % others.length;
        own.push([others[user]!, otherPools[user]![i]!]);
      }
    }
    let k = 0;
    return (): BenchRequest => {
      const [user, id] = own[k++ % own.length]!;
      const next = taskStates.get(id) === 'started' ? 'newed' : 'started';
      taskStates.set(id, next);
      return { method: 'PUT', path: `/api/tasks/${id}/state`, token: user.token, body: { task: { state: next } } };
    };
  };
  const createSpread: Script = (connection) => {
    let k = 0;
    return () => ({
      method: 'POST',
      path: '/api/users/me/tasks',
      token: others[(connection + k++) % others.length]!.token,
      body: { task: { label: `bench task ${++created}` } },
    });
  };
  const createInProject: Script = () => () => ({
    method: 'POST',
    path: '/api/users/me/tasks',
    token: world.inProject.user.token,
    body: { task: { label: `bench project task ${++created}`, project_id: world.inProject.project } },
  });
  const getTask: Script = (connection) => {
    let k = 0;
    return () => ({ method: 'GET', path: `/api/tasks/${middle[(k++ * 7 + connection) % middle.length]}`, token: main.token });
  };
  const startPause: Script = (connection) => {
    const user = others[connection % others.length]!;
    const project = user.projects[0]!;
    return () => {
      const start = projectStates.get(project) !== 'started';
      projectStates.set(project, start ? 'started' : 'paused');
      return {
        method: 'PUT',
        path: `/api/projects/${project}/state`,
        token: user.token,
        body: { project: start ? { state: 'started', due_at: farDue } : { state: 'paused' } },
      };
    };
  };
  const mixed: Script = (connection) => {
    const tasksList = listTasks(main, mainPages)(connection);
    const projectsList = listProjects(main, 8)(connection);
    const create = createMain(connection);
    const change = changeState(connection);
    const reorder = reorderIn(main, middle, 4_901, 1_000 + connection)(connection);
    let k = 0;
    return () => {
      const n = k++;
      const r = (n * 37 + connection * 11) % 100; // 37 is prime to 100: every residue once per 100
      if (r < MIX.listTasks) return tasksList();
      if (r < MIX.listTasks + MIX.listProjects) return projectsList();
      if (r < 70) return { method: 'GET', path: `/api/tasks/${middle[(n + connection) % middle.length]}`, token: main.token };
      if (r < 80) return create();
      if (r < 90) return change();
      return reorder();
    };
  };
  return {
    getTask,
    createMain,
    changeState,
    changeStateSpread,
    createSpread,
    createInProject,
    startPause,
    mixed,
  };
}
