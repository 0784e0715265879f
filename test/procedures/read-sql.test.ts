/**
 * The SQL of everything but the writes of test/procedures/write-sql/, committed the same way,
 * one file per request or job under test/procedures/read-sql/: the lists (with and without
 * the filters, sorts and pages of API-CONTRACT §12), single reads, the change log's feed, an
 * event stream's statements (its ticket, its lease, catching up, re-checking its token), the
 * login and the token's lookup, webhooks as their owner manages them and as the deliverer
 * sends them, housekeeping, batches, and the rate limit. Statements in order, one per
 * paragraph, formatted one clause a line (test/helpers/sql-format.ts), their values as `?`;
 * test/rules/citus-statements.test.ts holds each to the rules a database split by user needs.
 *
 * Requests run through their procedures (createCaller, no HTTP) on a database of the file's
 * own, with a clock that does not move. What no procedure sends (the event stream's lease and
 * ticket, the deliverer, housekeeping) is called through the functions the server calls, on
 * the same database. Each snapshot holds what its call sent, however many rows it found: a
 * statement's text does not depend on them.
 *
 * After a deliberate change: `npx vitest run test/procedures/read-sql.test.ts -u` rewrites the files.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '../../src/app/orm.js';
import { writes } from '../../src/app/write-functions.js';
import { createCaller } from '../../src/app/router.js';
import { hashTicket } from '../../src/changes/events.router.js';
import { startCursor } from '../../src/changes/event-feed.js';
import { EVENTS_PAGE_SIZE } from '../../src/changes/event.schema.js';
import { pruneChangeLog, pruneStreamTickets, readEvents, redeemStreamTicket, userOfStreamTicket } from '../../src/changes/event.store.js';
import { pruneStreamLeases, streamLeases } from '../../src/changes/stream-leases.js';
import { ManualClock } from '../../src/core/clock.js';
import { createContextInner } from '../../src/core/context.js';
import { Announcer } from '../../src/writes/announcer.js';
import { pruneRateLimits } from '../../src/core/rate-limit.js';
import { pruneIdempotencyKeys } from '../../src/writes/idempotency.js';
import { authenticate, isTokenValid, pruneExpiredTokens } from '../../src/users/authentication.js';
import { hashAccessToken } from '../../src/users/credentials.js';
import { claimDue, markSending, recordStep, releaseLease, releaseLeases, waitingEvents, webhookOwners } from '../../src/webhooks/delivery.store.js';
import { pruneDeliveries } from '../../src/webhooks/webhook.store.js';
import { formatStatements } from '../helpers/sql-format.js';
import { T0, createTestDatabase } from '../helpers/test-app.js';
import { testResolver } from '../helpers/test-resolver.js';

const clock = new ManualClock(T0);
const DAY = 86_400;
const NOW = Math.floor(T0 / 1000);
const RETENTION_DAYS = 30;
let orm: MikroORM;
const announcer = new Announcer(() => orm.em.fork());
let log: string[] | null = null;
/** While the idempotency records' own prune is snapshotted, its statements are kept. */
let pruning = false;

beforeAll(async () => {
  orm = await openOrm(await createTestDatabase(), {
    migrate: true,
    poolSize: 4,
    onQuery: (line) => {
      // The idempotency records' prune starts after a keyed write, detached from every request
      // (src/writes/idempotency.ts `pruneNowAndThen`): it has a snapshot of its own below.
      const backgroundPrune = !pruning && /from idempotency_keys (where created_at <=|k where k\.user_id = \? and k\.created_at <=)/.test(line);
      if (log && line.startsWith('[query]') && !backgroundPrune) log.push(line);
    },
  });
});
afterAll(async () => {
  await orm?.close(true);
});

const em = () => orm.em.fork();

function caller(token?: string, options: { rateLimited?: boolean } = {}) {
  return createCaller(() => {
    const context = em();
    return createContextInner({
      em: context, clock, writes, announcer, passwordHashCost: 1024,
      authenticate: (a) => authenticate(context, a, clock.now()),
      headers: { authorization: token },
      baseUrl: 'http://read-sql.test',
      webhooks: { allowPrivateUrls: false, resolve: testResolver() },
      ...(options.rateLimited ? { rateLimits: { authPerMinute: 100, perMinute: 100 } } : {}),
    });
  });
}

/** A statement as logged, without the log's prefix and timing, its white space folded. */
/** A statement as logged: without the log's prefix and timing, its white space folded, the write functions' schema (named by their hash) as `w`. */
const statementOf = (line: string) =>
  line.replace(/^\[query\] /, '').replace(/ \[took \d+ ms(, [^\]]*)?\]$/, '').replace(/\s+/g, ' ').replace(/\bw_[0-9a-f]{16}\./g, 'w.').trim();

/**
 * Runs `call` and returns the statements it sent. A call that is `refused` must fail (its
 * statements count too); any other must succeed, so that no snapshot holds half a request.
 */
async function sqlOf(call: () => Promise<unknown>, refused: boolean): Promise<string[]> {
  await announcer.idle(); // an earlier write's NOTIFY is not this call's
  log = [];
  try {
    if (refused) await expect(call()).rejects.toThrow();
    else await call();
    await announcer.idle(); // a batch's NOTIFY, sent after its answer, is the batch's
    return log.map(statementOf);
  } finally {
    log = null;
  }
}

const snapshot = async (name: string, call: () => Promise<unknown>, { refused = false } = {}) => {
  const statements = await sqlOf(call, refused);
  expect(statements.length, `${name} sent no statement`).toBeGreaterThan(0);
  await expect(`-- ${name}\n\n${(await formatStatements(statements)).join('\n\n')}\n`).toMatchFileSnapshot(`./read-sql/${name}.sql`);
};

let users = 0;
async function user() {
  const username = `reader${++users}`;
  const doc = await caller().users.register({ user: { username, password: 'correct horse' } });
  const token = doc.meta.token as string;
  return { id: doc.data.id as number, username, token, tokenHash: hashAccessToken(token), api: caller(token) };
}

/** A user with a started project holding tasks in every listed state, and a task of no project. */
async function userWithTasks() {
  const reader = await user();
  const { api } = reader;
  const { data: project } = await api.projects.create({ project: { name: 'Garden' } });
  await api.projects.changeState({ id: project.id, project: { state: 'started', due_at: NOW + 7 * DAY } });
  const ids: number[] = [];
  for (const label of ['Dig', 'Sow', 'Water', 'Weed']) ids.push((await api.tasks.create({ task: { label, project_id: project.id } })).data.id);
  await api.tasks.changeState({ id: ids[1]!, task: { state: 'planned' } });
  await api.tasks.changeState({ id: ids[2]!, task: { state: 'planned' } });
  await api.tasks.changeState({ id: ids[2]!, task: { state: 'finished' } });
  await api.tasks.changeState({ id: ids[3]!, task: { state: 'abandoned' } });
  const { data: loose } = await api.tasks.create({ task: { label: 'Rest' } });
  return { ...reader, project, taskIds: ids, looseId: loose.id };
}

describe('the SQL of every read, stream and housekeeping job', () => {
  it('users: the token lookup, me, time zone, a refused login, an old-form token, with rate limits', async () => {
    const { token, api } = await user();
    await snapshot('users.me', () => api.users.me());
    await snapshot('users.update', () => api.users.update({ user: { time_zone: 'Europe/Paris' } }));
    await snapshot('users.authorize-unknown', () => caller().users.authorize({ username: 'nobody', password: 'correct horse' }), { refused: true });
    // A token of the form issued before tokens named their user (32 random bytes, base64url).
    const { id } = await user();
    const old = 'o'.repeat(43);
    await em().execute('insert into access_tokens (token_hash, user_id, created_at, expires_at) values (?, ?, ?, ?)', [
      hashAccessToken(old), id, clock.now(), new Date(T0 + 86_400_000),
    ]);
    await snapshot('users.me-old-form-token', () => caller(old).users.me());
    await snapshot('users.me-rate-limited', () => caller(token, { rateLimited: true }).users.me());
    await snapshot('users.authorize-rate-limited', () => caller(undefined, { rateLimited: true }).users.authorize({ username: 'reader1', password: 'correct horse' }));
  });

  it('the account: a password changed, a user deleted with rows of every kind, with rate limits', async () => {
    const { username, token } = await user();
    await caller().users.authorize({ username, password: 'correct horse' });
    await snapshot('users.changePassword', () =>
      caller(token, { rateLimited: true }).users.changePassword({ user: { current_password: 'correct horse', password: 'battery staple' } }));
    const { api, token: doomed } = await userWithTasks();
    await api.webhooks.create({ webhook: { url: 'https://hooks.example.com/gone' } });
    await api.events.ticket();
    await snapshot('users.delete', () => caller(doomed, { rateLimited: true }).users.delete({ user: { password: 'correct horse' } }));
  });

  it('tasks: get, list by default, paged, with every filter and sort', async () => {
    const { api, project, taskIds } = await userWithTasks();
    await snapshot('tasks.get', () => api.tasks.get({ id: taskIds[0]! }));
    await snapshot('tasks.get-unknown', () => api.tasks.get({ id: 999_999 }), { refused: true });
    await snapshot('tasks.list', () => api.tasks.list({}));
    await snapshot('tasks.list-page', () => api.tasks.list({ page: 2, page_size: 2 }));
    await snapshot('tasks.list-sort', () => api.tasks.list({ sort: '-label' }));
    await snapshot('tasks.list-filters', () =>
      api.tasks.list({
        state: ['newed', 'started', 'planned'], project_id: [project.id, null], q: 'w',
        planned_after: NOW - DAY, planned_before: NOW + DAY, sort: 'plannedAt', page_size: 10,
      }),
    );
    await snapshot('tasks.list-finished-today', () => api.tasks.list({ state: ['finished'], planned_on: 'today', sort: '-finishedAt' }));
    await snapshot('tasks.list-one-state-one-project', () => api.tasks.list({ state: ['planned'], project_id: [project.id] }));
    await snapshot('tasks.list-no-project', () => api.tasks.list({ project_id: [null], sort: 'startedAt' }));
  });

  it('projects: get, list by default, paged, with every filter and sort', async () => {
    const { api, project } = await userWithTasks();
    await api.projects.create({ project: { name: 'Kitchen' } });
    await snapshot('projects.get', () => api.projects.get({ id: project.id }));
    await snapshot('projects.list', () => api.projects.list({}));
    await snapshot('projects.list-page', () => api.projects.list({ page: 2, page_size: 1 }));
    await snapshot('projects.list-filters', () =>
      api.projects.list({ state: ['started', 'paused'], q: 'gard', due_after: NOW, due_before: NOW + 30 * DAY, sort: '-dueAt' }),
    );
  });

  it('the change log: the newest id, a page after a cursor, a ticket', async () => {
    const { api } = await userWithTasks();
    await snapshot('events.list-newest', () => api.events.list({}));
    await snapshot('events.list-after', () => api.events.list({ after: '2' }));
    await snapshot('events.ticket', () => api.events.ticket());
  });

  it('an event stream: its ticket redeemed, its cursor, its lease taken, renewed and released, catching up, its token re-checked', async () => {
    const { id, tokenHash, api } = await userWithTasks();
    const { data: { attributes: { ticket } } } = await api.events.ticket();
    await snapshot('stream.ticket-redeem', () => redeemStreamTicket(em(), userOfStreamTicket(ticket)!, hashTicket(ticket), clock.now()));
    await snapshot('stream.start-cursor', () => startCursor(em(), id, '1'));
    const leases = streamLeases(em);
    const lease = { id: randomUUID(), userId: id, tokenHash };
    await snapshot('stream.lease-take', () => leases.take(lease, 10, 15_000));
    await snapshot('stream.lease-renew', () => leases.renew([lease], 15_000));
    await snapshot('stream.lease-release', () => leases.release([lease]));
    await snapshot('stream.catch-up', () => readEvents(em(), id, 0n, EVENTS_PAGE_SIZE));
    await snapshot('stream.token-check', () => isTokenValid(em(), id, tokenHash, clock.now()));
  });

  it('webhooks: as their owner manages them', async () => {
    const { api } = await userWithTasks();
    await snapshot('webhooks.create', () => api.webhooks.create({ webhook: { url: 'https://hooks.example.com/in', events: ['task.*'] } }));
    const { data: webhook } = await api.webhooks.create({ webhook: { url: 'https://hooks.example.com/second' } });
    await snapshot('webhooks.list', () => api.webhooks.list());
    await snapshot('webhooks.get', () => api.webhooks.get({ id: webhook.id }));
    await snapshot('webhooks.update', () => api.webhooks.update({ id: webhook.id, webhook: { url: 'https://hooks.example.com/third', description: 'Third' } }));
    await snapshot('webhooks.update-disable', () => api.webhooks.update({ id: webhook.id, webhook: { state: 'disabled' } }));
    await snapshot('webhooks.update-enable', () => api.webhooks.update({ id: webhook.id, webhook: { state: 'enabled' } }));
    await snapshot('webhooks.deliveries', () => api.webhooks.deliveries({ id: webhook.id }));
    await snapshot('webhooks.replay', () => api.webhooks.replay({ id: webhook.id, replay: { after: '1' } }));
    await snapshot('webhooks.test', () => api.webhooks.test({ id: webhook.id }));
    await snapshot('webhooks.rotateSecret', () => api.webhooks.rotateSecret({ id: webhook.id }));
    await snapshot('webhooks.delete', () => api.webhooks.delete({ id: webhook.id }));
  });

  it('the account\'s export: each section in keyset pages, in one read-only snapshot', async () => {
    const { api } = await userWithTasks();
    await api.webhooks.create({ webhook: { url: 'https://hooks.example.com/export' } });
    await snapshot('users.export', () => api.users.export());
  });

  it('webhook delivery: claims, a recorded step, leases given back, the metrics', async () => {
    const { id, api } = await user();
    await api.webhooks.create({ webhook: { url: 'https://hooks.example.com/delivery' } });
    await api.tasks.create({ task: { label: 'Ping' } });
    const now = clock.now();
    const owner = randomUUID();
    const leaseUntil = new Date(now.getTime() + 60_000);
    let claimed: Awaited<ReturnType<typeof claimDue>> = [];
    await snapshot('deliverer.claim-notified', async () => (claimed = await claimDue(em(), `${owner}:1`, now, leaseUntil, 16, [id])));
    expect(claimed).toHaveLength(1);
    const webhook = claimed[0]!;
    const event = webhook.pending[0]!;
    await snapshot('deliverer.mark-sending', () => markSending(em(), webhook.user_id, webhook.id, webhook.lease_owner, leaseUntil));
    await snapshot('deliverer.record-step', () =>
      recordStep(em(), {
        userId: webhook.user_id, id: webhook.id, owner: webhook.lease_owner, generation: webhook.generation,
        attempt: {
          eventId: event.id, eventType: event.type, attempt: 1, at: now, outcome: 'delivered',
          httpStatus: 204, error: null, durationMs: 12, nextAttemptAt: null,
        },
        cursor: event.id, leaseUntil, now,
      }),
    );
    await snapshot('deliverer.claim-round', () => claimDue(em(), `${owner}:2`, now, leaseUntil, 16, null));
    await snapshot('deliverer.release-lease', () => releaseLease(em(), webhook.user_id, webhook.id, webhook.lease_owner));
    await snapshot('deliverer.release-leases', () => releaseLeases(em(), owner));
    await snapshot('deliverer.waiting-events', () => waitingEvents(em()));
    await snapshot('deliverer.owners', () => webhookOwners(em()));
  });

  it('housekeeping: each job, with one user\'s rows to prune', async () => {
    const later = new Date(T0 + 400 * 86_400_000);
    // What the tests before left is pruned first: a job's statements repeat per user it finds.
    const jobs = [
      () => pruneRateLimits(em(), later), () => pruneExpiredTokens(em(), later), () => pruneChangeLog(em(), later, RETENTION_DAYS),
      () => pruneStreamTickets(em(), later), () => pruneDeliveries(em(), later, RETENTION_DAYS), () => pruneIdempotencyKeys(em(), later),
    ];
    for (const job of jobs) await job();
    // One user's rows of every kind, all older than `later` keeps: events, a token, a ticket, an
    // idempotency record, a webhook's attempt.
    const { id, api } = await userWithTasks();
    await api.events.ticket();
    const { data: webhook } = await api.webhooks.create({ webhook: { url: 'https://hooks.example.com/old' } });
    await em().execute(
      `insert into idempotency_keys (user_id, key, fingerprint, status, body, etag, created_at) values (?, 'old', 'f', 201, null, null, ?)`,
      [id, clock.now()],
    );
    await em().execute(
      `insert into webhook_deliveries (user_id, webhook_id, event_id, event_type, attempt, at, outcome, http_status, error, duration_ms, next_attempt_at)
       values (?, ?, '1', 'task.created', 1, ?, 'delivered', 204, null, 5, null)`,
      [id, webhook.id, clock.now()],
    );
    await snapshot('housekeeping.rate-limits', () => pruneRateLimits(em(), later));
    await snapshot('housekeeping.access-tokens', () => pruneExpiredTokens(em(), later));
    await snapshot('housekeeping.change-log', () => pruneChangeLog(em(), later, RETENTION_DAYS));
    await snapshot('housekeeping.stream-tickets', () => pruneStreamTickets(em(), later));
    await snapshot('housekeeping.stream-leases', () => pruneStreamLeases(em()));
    await snapshot('housekeeping.webhook-deliveries', () => pruneDeliveries(em(), later, RETENTION_DAYS));
    pruning = true;
    try {
      await snapshot('housekeeping.idempotency-keys', () => pruneIdempotencyKeys(em(), later));
    } finally {
      pruning = false;
    }
  });

  it('batch: operations of every kind in one transaction, one that fails, and one counted by the rate limit', async () => {
    const { api, project, taskIds, token } = await userWithTasks();
    // `.call`: tRPC's caller takes a path ending in `apply` for Function.prototype.apply.
    const apply = (input: Parameters<typeof api.batch.apply>[0]) => api.batch.apply.call(undefined, input);
    await snapshot('batch.apply', () =>
      apply({
        operations: [
          { op: 'projects.create', ref: 'shed', input: { project: { name: 'Shed' } } },
          { op: 'tasks.create', ref: 'paint', input: { task: { label: 'Paint', project_id: { ref: 'shed' } } } },
          { op: 'projects.changeState', input: { id: { ref: 'shed' }, project: { state: 'started', due_at: NOW + 7 * DAY } } },
          { op: 'tasks.update', input: { id: { ref: 'paint' }, task: { label: 'Paint twice' } } },
          { op: 'tasks.changeState', input: { id: { ref: 'paint' }, task: { state: 'planned' } } },
          { op: 'tasks.reorder', input: { id: { ref: 'paint' }, task: { order: 1 } } },
          { op: 'projects.update', input: { id: project.id, project: { description: 'Out back' } } },
          { op: 'projects.delete', input: { id: { ref: 'shed' } } },
        ],
      }),
    );
    await snapshot('batch.apply-failing', () =>
      apply({
        operations: [
          { op: 'tasks.update', input: { id: taskIds[0]!, task: { label: 'Dig deep' } } },
          { op: 'tasks.changeState', input: { id: 999_999, task: { state: 'planned' } } },
        ],
      }),
      { refused: true },
    );
    // Its further operations are counted all or none, in one statement (src/core/rate-limit.ts `hitIfFits`).
    const limited = caller(token, { rateLimited: true }).batch.apply;
    await snapshot('batch.apply-rate-limited', () =>
      limited.call(undefined, { operations: [{ op: 'tasks.create', input: { task: { label: 'Mulch' } } }, { op: 'tasks.create', input: { task: { label: 'Rake' } } }] }),
    );
  });
});
