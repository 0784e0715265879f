/**
 * The users of the filtered-list bench (bench/scenarios/lists.ts), seeded with plain SQL
 * (`insert … select generate_series`): realistic shapes, with the same small sets (a project
 * of 50 tasks, 12 tasks planned today) at every size, so that only the user's other tasks grow.
 */
import type pg from 'pg';
import { sleep } from './env.js';
import { recountUserCountersSql } from '../../src/tasks/task.sql.js';
import { seedUser, type SeededUser } from './seed.js';

export const ZONE = 'Europe/Paris';
/** Tasks of the one project every size has, all listed. */
export const PROJECT_TASKS = 50;
/** Tasks planned today, at every size. */
export const PLANNED_TODAY = 12;
/** One label in this many holds RARE_WORD (4,999, not 5,000: the state's scatter repeats every 1,000 orders). */
export const RARE_EVERY = 4_999;
export const RARE_WORD = 'Zeppelin';
export const WORDS = ['call', 'email', 'review', 'write', 'fix', 'plan', 'read', 'buy', 'clean', 'check', 'draft', 'send'];

export interface ListUser extends SeededUser {
  label: string;
  project50: number;
  projectCount: number;
}

/**
 * A user with `size` tasks, in ZONE: ~100 projects per 10,000 tasks (10 at least) holding 70 %
 * of them, plus one started project with exactly PROJECT_TASKS tasks spread over the whole
 * order, all listed; PLANNED_TODAY tasks planned today; the rest by a fixed scatter of the
 * order: 80 % finished long ago (15 to 715 days), 3 % finished within the list's 14 days,
 * 3 % abandoned, 8 % newed, 3 % started, 3 % planned on an earlier day. One label in
 * RARE_EVERY holds RARE_WORD. `today0` is the first
 * instant of the user's day (src/core/user-day.ts, as the service computes it), `now` the
 * seed's clock: today's plans fall between the two.
 */
export async function seedListUser(client: pg.Client, username: string, label: string, size: number, today0: Date, now: Date): Promise<ListUser> {
  const user = await seedUser(client, username, 0, 0);
  await client.query('update users set time_zone = $2 where id = $1', [user.id, ZONE]);
  const projectCount = Math.max(10, Math.round(size / 100));
  const { rows: projects } = await client.query<{ id: number }>(
    `insert into projects (user_id, name, slug, state, started_at, paused_at, finished_at, created_at)
     select $1, 'Project ' || g, 'project-' || g,
            case g % 4 when 0 then 'finished' when 1 then 'paused' else 'newed' end,
            case when g % 4 in (0, 1) then $3::timestamptz - interval '400 days' end,
            case when g % 4 = 1 then $3::timestamptz - interval '200 days' end,
            case when g % 4 = 0 then $3::timestamptz - interval '300 days' end,
            $3::timestamptz - interval '800 days'
       from generate_series(1, $2::int) g
     returning id`,
    [user.id, projectCount, today0],
  );
  const { rows: current } = await client.query<{ id: number }>(
    `insert into projects (user_id, name, slug, state, started_at, due_at, created_at)
     values ($1, 'Current sprint', 'current-sprint', 'started', $2::timestamptz - interval '10 days', $2::timestamptz + interval '20 days', $2::timestamptz - interval '12 days')
     returning id`,
    [user.id, today0],
  );
  const project50 = current[0]!.id;
  // The project's tasks spread over the whole order; today's near evenly too, never on one of them.
  const step = size / PROJECT_TASKS;
  const inProject = Array.from({ length: PROJECT_TASKS }, (_, i) => Math.floor(step / 2) + Math.floor(i * step));
  const taken = new Set(inProject);
  const plannedToday: number[] = [];
  for (let i = 0; plannedToday.length < PLANNED_TODAY; i++) {
    let g = Math.floor(((i + 0.5) * size) / PLANNED_TODAY) + 1;
    while (taken.has(g)) g++;
    taken.add(g);
    plannedToday.push(g);
  }
  await client.query(
    `with k as (
       select g, ((g::bigint * 7919 + 13) % 1000)::int as r,
              array_position($4::int[], g) as in_project, array_position($5::int[], g) as today
         from generate_series(1, $2::int) g
     ), kinds as (
       select g, in_project, today,
              case when in_project is not null then (array['newed', 'started', 'planned', 'recent', 'newed'])[1 + in_project % 5]
                   when today is not null then 'today'
                   when r < 800 then 'old' when r < 830 then 'recent' when r < 860 then 'abandoned'
                   when r < 940 then 'newed' when r < 970 then 'started' else 'planned' end as kind
         from k
     ), dated as (
       select g, in_project, kind,
              case kind
                when 'old' then $6::timestamptz - (15 + g % 700) * interval '1 day' - (g % 20) * interval '1 hour'
                when 'recent' then $6::timestamptz - (g % 13) * interval '1 day' - (1 + g % 20) * interval '1 hour'
              end as finished_at,
              case kind
                when 'planned' then $6::timestamptz - (1 + g % 30) * interval '1 day' + interval '10 hours'
                when 'today' then $6::timestamptz + ($7::timestamptz - $6::timestamptz) * (today / ($8::float8 + 1))
              end as planned_at,
              case kind
                when 'started' then $6::timestamptz - (g % 60) * interval '1 day' - interval '2 hours'
                when 'planned' then $6::timestamptz - (3 + g % 30) * interval '1 day'
                when 'today' then $6::timestamptz - interval '2 days'
              end as started_at,
              case when kind = 'abandoned' then $6::timestamptz - (g % 400) * interval '1 day' - interval '1 hour' end as abandoned_at
         from kinds
     )
     insert into tasks (user_id, project_id, label, "order", planned_count, state, started_at, planned_at, finished_at, abandoned_at, created_at)
     select $1,
            case when in_project is not null then $9::int
                 when g % 10 < 7 then ($3::int[])[1 + (g / 7) % cardinality($3::int[])] end,
            'Task ' || g || ' ' || ($10::text[])[1 + g % cardinality($10::text[])] || case when g % $11::int = 17 then ' ' || $12::text else '' end,
            g,
            case when kind in ('old', 'recent') then 1 + g % 3 when kind in ('planned', 'today') then 1 else 0 end,
            case kind when 'old' then 'finished' when 'recent' then 'finished' when 'today' then 'planned' else kind end,
            case when finished_at is not null then finished_at - interval '3 days' else started_at end,
            case when finished_at is not null then finished_at - interval '1 day' else planned_at end,
            finished_at,
            abandoned_at,
            least(coalesce(finished_at - interval '4 days', started_at, abandoned_at, $6::timestamptz), $6::timestamptz) - interval '1 hour'
       from dated`,
    [
      user.id, size, `{${projects.map((p) => p.id).join(',')}}`, `{${inProject.join(',')}}`, `{${plannedToday.join(',')}}`,
      today0, now, PLANNED_TODAY, project50, `{${WORDS.join(',')}}`, RARE_EVERY, RARE_WORD,
    ],
  );
  // The counters on the user's row a write moves (the next order, the open tasks: docs/design/writes.md).
  await client.query(recountUserCountersSql('$1'), [user.id]);
  return { ...user, tasks: size, projects: projects.map((p) => p.id), label, project50, projectCount: projectCount + 1 };
}

/**
 * `vacuum analyze`, then `vacuum tasks` again until its pages are all-visible, as autovacuum
 * leaves rows that no longer change. A vacuum straight after the seed may set no page
 * all-visible (seen here: a commit made with synchronous_commit off gets its hint bits only
 * once its WAL is flushed, and a database-wide vacuum after a checkpoint still set none), and
 * index-only scans would then read the heap for every entry, as on a table no vacuum ever
 * reached. Returns what it left, for the report.
 */
export async function vacuumUntilVisible(client: pg.Client): Promise<string> {
  await client.query('checkpoint');
  await client.query('vacuum analyze');
  const visibility = async () =>
    (await client.query<{ relpages: number; relallvisible: number }>(`select relpages, relallvisible from pg_class where relname = 'tasks'`)).rows[0]!;
  let visible = await visibility();
  for (let i = 0; i < 10 && visible.relallvisible < visible.relpages; i++) {
    await sleep(500);
    await client.query('vacuum tasks');
    visible = await visibility();
  }
  return `\`checkpoint\`, \`vacuum analyze\`, \`vacuum tasks\` until its pages are all-visible: ${visible.relallvisible} of the ${visible.relpages} pages of \`tasks\` all-visible`;
}
