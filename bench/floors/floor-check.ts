/**
 * Checks the fewest floor (bench/floors/fewest-floor.ts) against the service, on the seeded bench
 * database, for every endpoint the bench drives: the same status and byte-for-byte the same
 * body (same Host header), and for writes the same change log (API-CONTRACT.md §10): the
 * events it stored (numbers following the owner's previous mark, types in the service's
 * order, each `data` the resource's document as the service answers it afterwards), the
 * owner's mark moved to the last one, the NOTIFY payload carrying the same events, and a
 * refused write taking no number. Where the service can make the very same change (a reorder),
 * the floor's events are compared with the service's own events for it.
 */
import pg from 'pg';

export type Raw = (base: string, method: string, path: string, token: string, body?: unknown) => Promise<{ status: number; text: string }>;

export interface CheckInput {
  serviceUrl: string;
  floorUrl: string;
  databaseUrl: string;
  raw: Raw;
  main: { id: number; token: string };
  /** A user whose projects the bench's load leaves alone, with its project ids. */
  spare: { id: number; token: string; projects: number[] };
  mainPages: number;
  /** A planned task of the main user. */
  plannedTask: number;
  /** Tasks of the main user in the middle of its order. */
  middle: number[];
  farDue: number;
  /** A user with a started project (`project`) and others not started (`user.projects[1]` is newed), for creates in a project. */
  inProject: { user: { id: number; token: string; projects: number[] }; project: number };
}

interface Event {
  seq: number;
  type: string;
  data: string;
}

export async function checkFloor(input: CheckInput): Promise<{ lines: string[]; ok: boolean }> {
  const { serviceUrl: S, floorUrl: F, raw, main, spare } = input;
  const lines: string[] = [];
  let ok = true;
  const note = (label: string, good: boolean, detail = '') => {
    if (!good) ok = false;
    lines.push(`${label}: ${good ? 'identical' : 'DIFFERENT'}${detail ? ` ${detail}` : ''}`);
  };
  const db = new pg.Client({ connectionString: input.databaseUrl });
  await db.connect();
  const payloads: string[] = [];
  db.on('notification', (n) => payloads.push(n.payload ?? ''));
  await db.query('listen user_events');
  const mark = async (userId: number) => Number((await db.query('select last_event_seq::text as s from users where id = $1', [userId])).rows[0].s);
  // The stored text, re-serialised: the same members in the same order, whatever the spacing
  // (json_build_object writes `"a" : 1`; clients only ever get the parsed document).
  const eventsAfter = async (userId: number, seq: number): Promise<Event[]> =>
    (await db.query('select seq::int as seq, type, data::text as data from events where user_id = $1 and seq > $2 order by seq', [userId, seq])).rows
      .map((e: Event) => ({ ...e, data: JSON.stringify(JSON.parse(e.data)) }));
  const settle = () => new Promise((r) => setTimeout(r, 150));
  /** The events a write stored, and what they must be: numbered on, the mark moved, notified alike. */
  const logOf = async (userId: number, before: number, label: string): Promise<Event[]> => {
    await settle();
    const events = await eventsAfter(userId, before);
    const after = await mark(userId);
    const numbered = events.every((e, i) => e.seq === before + 1 + i) && after === before + events.length;
    const head = `${userId}:${before + 1}:${before + events.length}`;
    const payload = payloads.find((p) => p === head || p.startsWith(head + ':'));
    let notified = payload !== undefined;
    if (payload && payload.length > head.length) {
      const sent = JSON.parse(payload.slice(head.length + 1)) as Array<{ id: string; type: string; data: unknown }>;
      notified = sent.length === events.length && sent.every((s, i) => s.id === String(events[i]!.seq) && s.type === events[i]!.type && JSON.stringify(s.data) === events[i]!.data);
    }
    if (!numbered || !notified) {
      ok = false;
      lines.push(`${label} change log: ${numbered ? '' : 'NUMBERS WRONG '}${notified ? '' : 'NOTIFY MISSING OR DIFFERENT'}`);
    }
    return events;
  };
  const same = (a: { status: number; text: string }, b: { status: number; text: string }) => a.status === b.status && a.text === b.text;
  const dataOf = (text: string) => JSON.stringify(JSON.parse(text).data);
  const both = (method: string, path: string, token: string, body?: unknown) => Promise.all([raw(S, method, path, token, body), raw(F, method, path, token, body)]);

  try {
    // ---- reads ----------------------------------------------------------------------------
    for (const page of [1, 2, 100, input.mainPages, input.mainPages + 1]) {
      const [s, f] = await both('GET', `/api/users/me/tasks?page=${page}`, main.token);
      note(`list tasks p.${page}`, same(s, f), `(${s.status}, ${s.text.length} bytes)`);
    }
    for (const page of [1, 2, 8, 9]) {
      const [s, f] = await both('GET', `/api/users/me/projects?page=${page}`, main.token);
      note(`list projects p.${page}`, same(s, f), `(${s.status}, ${s.text.length} bytes)`);
    }
    for (const id of [input.middle[0]!, input.plannedTask, 2_000_000_000]) {
      const [s, f] = await both('GET', `/api/tasks/${id}`, main.token);
      note(`get task ${id === 2_000_000_000 ? '(unknown)' : id}`, same(s, f), `(${s.status})`);
    }

    // ---- create ---------------------------------------------------------------------------
    {
      const before = await mark(main.id);
      const made = await raw(F, 'POST', '/api/users/me/tasks', main.token, { task: { label: 'floor check "quoted" \\ label' } });
      const id = JSON.parse(made.text).data.id as number;
      const seen = await raw(S, 'GET', `/api/tasks/${id}`, main.token);
      const events = await logOf(main.id, before, 'create');
      note('create (201 vs the service\'s GET)', made.status === 201 && seen.status === 200 && made.text === seen.text);
      note('create event', events.length === 1 && events[0]!.type === 'task.created' && events[0]!.data === dataOf(seen.text));
    }

    // ---- create in a project: the task and the project's document, whose list now ends with it ----
    {
      const { user, project } = input.inProject;
      const inProject = async (base: string, label: string, projectId: number) => {
        const before = await mark(user.id);
        const made = await raw(base, 'POST', '/api/users/me/tasks', user.token, { task: { label, project_id: projectId } });
        const id = made.status === 201 ? (JSON.parse(made.text).data.id as number) : 0;
        const task = await raw(S, 'GET', `/api/tasks/${id}`, user.token);
        const seenProject = await raw(S, 'GET', `/api/projects/${projectId}`, user.token);
        const events = await logOf(user.id, before, `create in project ${projectId} (${base === S ? 'service' : 'floor'})`);
        const docs = events.length === 2 && events[0]!.type === 'task.created' && events[0]!.data === dataOf(task.text) &&
          events[1]!.type === 'project.updated' && events[1]!.data === dataOf(seenProject.text);
        return { made, task, docs, state: made.status === 201 ? (JSON.parse(made.text).data.attributes.state as string) : '' };
      };
      // The service's own create, as a control: its events are its answer's data and the project's GET.
      const service = await inProject(S, 'service check in a project', project);
      note('control: the service\'s create in a started project (its 2 events: its answer\'s data, the project\'s GET)', service.made.status === 201 && service.made.text === service.task.text && service.docs, `(${service.state})`);
      const started = await inProject(F, 'floor check in a project', project);
      note('create in a started project (201 vs the service\'s GET; 2 events vs the service\'s GETs)', started.made.status === 201 && started.made.text === started.task.text && started.docs && started.state === service.state, `(${started.state})`);
      const newed = await inProject(F, 'floor check in a newed project', user.projects[1]!);
      note('create in a project not started', newed.made.status === 201 && newed.made.text === newed.task.text && newed.docs, `(${newed.state})`);
      // Another user's project: refused alike, no number taken.
      const before = await mark(user.id);
      const [s, f] = await both('POST', '/api/users/me/tasks', user.token, { task: { label: 'floor check', project_id: spare.projects[0]! } });
      note('create in another user\'s project (refused)', same(s, f) && (await mark(user.id)) === before, `(${s.status})`);
    }

    // ---- change task state ----------------------------------------------------------------
    {
      const id = input.plannedTask;
      const path = `/api/tasks/${id}/state`;
      let before = await mark(main.id);
      const done = await raw(F, 'PUT', path, main.token, { task: { state: 'finished' } });
      const seen = await raw(S, 'GET', `/api/tasks/${id}`, main.token);
      let events = await logOf(main.id, before, 'change state');
      note('change state finish (vs the service\'s GET)', done.status === 200 && seen.status === 200 && done.text === seen.text);
      note('change state event', events.length === 1 && events[0]!.type === 'task.updated' && events[0]!.data === dataOf(seen.text));
      // Refused: same 422 body, and no number taken by either.
      before = await mark(main.id);
      const [s, f] = await both('PUT', path, main.token, { task: { state: 'started' } });
      note('change state refused (invalid_transition)', same(s, f) && s.status === 422 && (await mark(main.id)) === before, `(${s.status}, mark ${before} → ${await mark(main.id)})`);
      // The service's own write, as a control of this check: its event is its answer's data.
      before = await mark(main.id);
      const back = await raw(S, 'PUT', path, main.token, { task: { state: 'planned' } });
      events = await logOf(main.id, before, 'change state (service)');
      note('control: the service\'s replan event is its answer\'s data', events.length === 1 && events[0]!.data === dataOf(back.text));
      before = await mark(main.id);
      const again = await raw(F, 'PUT', path, main.token, { task: { state: 'finished' } });
      const seen2 = await raw(S, 'GET', `/api/tasks/${id}`, main.token);
      events = await logOf(main.id, before, 'change state again');
      note('change state finish again', again.text === seen2.text && events.length === 1 && events[0]!.data === dataOf(seen2.text));
      await raw(S, 'PUT', path, main.token, { task: { state: 'planned' } });
    }

    // ---- reorder: the service and the floor make the same move ------------------------------
    {
      const id = input.middle[10]!;
      const from = JSON.parse((await raw(S, 'GET', `/api/tasks/${id}`, main.token)).text).data.attributes.order as number;
      const to = from + 30;
      const move = async (base: string, order: number) => {
        const before = await mark(main.id);
        const res = await raw(base, 'PUT', `/api/tasks/${id}/order`, main.token, { task: { order } });
        return { res, events: await logOf(main.id, before, `reorder ${base === S ? 'service' : 'floor'} → ${order}`) };
      };
      const s1 = await move(S, to);
      const f1 = await move(F, from);
      const f2 = await move(F, to);
      const s2 = await move(S, from);
      const sameEvents = (a: Event[], b: Event[]) => a.length === b.length && a.every((e, i) => e.type === b[i]!.type && e.data === b[i]!.data);
      note(`reorder down 30 (answer and ${s1.events.length} events vs the service's same move)`, same(s1.res, f2.res) && sameEvents(s1.events, f2.events));
      note(`reorder up 30 (answer and ${s2.events.length} events vs the service's same move)`, same(s2.res, f1.res) && sameEvents(s2.events, f1.events));
      const [sNone, fNone] = await both('PUT', `/api/tasks/${id}/order`, main.token, { task: { order: from } });
      note('reorder in place', same(sNone, fNone));
    }

    // ---- project start / pause --------------------------------------------------------------
    {
      const project = spare.projects[2]!;
      const path = `/api/projects/${project}/state`;
      const check = async (label: string, body: unknown) => {
        const before = await mark(spare.id);
        const res = await raw(F, 'PUT', path, spare.token, body);
        const seen = await raw(S, 'GET', `/api/projects/${project}`, spare.token);
        const events = await logOf(spare.id, before, label);
        const taskEvents = events.slice(1);
        let docs = events[0]?.type === 'project.updated' && events[0].data === dataOf(seen.text);
        for (const e of taskEvents) {
          const id = JSON.parse(e.data).id as number;
          docs &&= e.type === 'task.updated' && e.data === dataOf((await raw(S, 'GET', `/api/tasks/${id}`, spare.token)).text);
        }
        note(`${label} (answer vs the service's GET; ${events.length} events vs the service's GETs)`, res.status === 200 && res.text === seen.text && docs);
      };
      await check('project start', { project: { state: 'started', due_at: input.farDue } });
      await check('project pause', { project: { state: 'paused' } });
      await check('project restart', { project: { state: 'started', due_at: input.farDue } });
      const [s, f] = await both('PUT', path, spare.token, { project: { state: 'started', due_at: input.farDue } });
      note('project start refused (invalid_transition)', same(s, f), `(${s.status})`);
      await check('project pause again', { project: { state: 'paused' } });
    }
  } finally {
    await db.end();
  }
  return { lines, ok };
}
