/**
 * The limit of open event streams per token (API-CONTRACT.md §10: 10) holds across server
 * processes and instances on one database, with services run as a user runs them: one with
 * WEB_CONCURRENCY=2 (two processes) and one more instance. 11 streams of one token opened
 * at once over both are 10 open and one 429, whichever door and whichever way of
 * authenticating asks; closing one lets another open; and the streams of an instance killed
 * with SIGKILL, which never said goodbye, give their slots back once their leases expire
 * (15 s after their last renewal), not before and not never.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, registerUser } from '../helpers/http.js';
import { spawnService, type SpawnedService, stopServices } from '../helpers/spawn-service.js';
import { openStream, openTrpcStream, type SseStream } from '../helpers/sse.js';
import { createTestDatabase } from '../helpers/test-app.js';

const EVENTS = '/api/users/me/events';
/** A lease lives 15 s after its last renewal (src/changes/event-hub.ts). */
const LEASE_SECONDS = 15;

let databaseUrl: string;
let pair: SpawnedService;
let single: SpawnedService;
const streams: SseStream[] = [];

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  const env = { DATABASE_URL: databaseUrl, RATE_LIMIT_PER_MINUTE: '0', RATE_LIMIT_AUTH_PER_MINUTE: '0' };
  // The pair migrates the database first; the single instance then starts on it.
  pair = await spawnService({ ...env, WEB_CONCURRENCY: '2' });
  single = await spawnService(env);
}, 90_000);

afterAll(async () => {
  streams.forEach((s) => s.close());
  await stopServices([pair, single]);
});

async function liveLeases(userId: number): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query(
      'select count(*)::int as n from event_stream_leases where user_id = $1 and expires_at > clock_timestamp()',
      [userId],
    );
    return rows[0].n;
  } finally {
    await client.end();
  }
}

async function open(service: SpawnedService, token: string): Promise<SseStream> {
  const s = await openStream(`${service.url}${EVENTS}`, { Authorization: token });
  streams.push(s);
  return s;
}

async function openWithTicket(service: SpawnedService, token: string): Promise<SseStream> {
  const ticket = await call(service.url, 'POST', `${EVENTS}/tickets`, { token });
  expect(ticket.status, ticket.text).toBe(201);
  const s = await openStream(`${service.url}${EVENTS}?ticket=${ticket.body.data.attributes.ticket}`);
  streams.push(s);
  return s;
}

/** `events.onChange` on /trpc (openTrpcStream), closed after the file's tests. */
async function openOnTrpc(service: SpawnedService, token: string): Promise<{ stream: SseStream; refusal: any }> {
  const opened = await openTrpcStream(service.url, token);
  streams.push(opened.stream);
  return opened;
}

function expectStreamRefused(s: SseStream) {
  expect(s.status, s.text).toBe(429);
  expect(JSON.parse(s.text!).errors[0].code).toBe('rate_limited');
  expect(Number(s.headers.get('retry-after'))).toBeGreaterThan(0);
}

/** Opens streams on `service` until one is refused; the opened ones stay open. */
async function openUntilRefused(service: SpawnedService, token: string): Promise<number> {
  for (let opened = 0; ; opened++) {
    const s = await open(service, token);
    if (s.status === 429) return opened;
    expect(s.status, s.text).toBe(200);
  }
}

/** Tries to open a stream every 200 ms until one opens, for at most `withinMs`. */
async function openOnceFree(service: SpawnedService, token: string, withinMs: number): Promise<void> {
  const started = Date.now();
  for (;;) {
    const s = await open(service, token);
    if (s.status === 200) return;
    expectStreamRefused(s);
    if (Date.now() - started > withinMs) throw new Error(`no slot came free within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('streams of one token over two instances (three processes)', () => {
  it('opens exactly 10 of 11 opened at once, on either door and with a ticket; a closed one frees its slot; a killed instance frees its slots when their leases expire', async () => {
    const user = await registerUser(pair.url, 'streams_across');
    const { token } = user;
    // One event in the log: a tRPC subscription from id 0 shows it is open by sending it.
    expect((await call(pair.url, 'POST', '/api/users/me/tasks', { token, body: { task: { label: 'first' } } })).status).toBe(201);

    // 11 at once, alternating the instances: exactly one is refused.
    const first = await Promise.all(Array.from({ length: 11 }, (_, i) => open(i % 2 === 0 ? pair : single, token)));
    const statuses = first.map((s) => s.status);
    expect(statuses.filter((s) => s === 200), `statuses: ${statuses}`).toHaveLength(10);
    expectStreamRefused(first.find((s) => s.status !== 200)!);
    expect(await liveLeases(user.id)).toBe(10);

    // The other ways in count in the same 10: a ticket, and the tRPC subscription.
    expectStreamRefused(await openWithTicket(single, token));
    const viaTrpc = await openOnTrpc(pair, token);
    expect(viaTrpc.refusal?.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
    expect(Number(viaTrpc.stream.headers.get('retry-after'))).toBeGreaterThan(0);

    // Closing one (on the single instance) lets one open (on the pair) once its lease is gone.
    const onSingle = first.filter((s, i) => s.status === 200 && i % 2 === 1);
    onSingle.pop()!.close();
    await openOnceFree(pair, token, 10_000);
    expect((await openOnTrpc(single, token)).refusal?.data).toMatchObject({ code: 'rate_limited' });

    // The single instance dies without closing anything: its streams' slots stay taken until
    // their leases expire (each at most 15 s after the kill: they were taken or last renewed
    // before it), then the pair can open as many streams as it held, and no more.
    const heldBySingle = onSingle.length;
    expect(heldBySingle).toBeGreaterThan(0);
    single.child.kill('SIGKILL');
    await single.exited;
    const killedAt = Date.now();
    expectStreamRefused(await open(pair, token));
    for (let i = 0; i < heldBySingle; i++) await openOnceFree(pair, token, killedAt + (LEASE_SECONDS + 5) * 1000 - Date.now());
    expect(await openUntilRefused(pair, token)).toBe(0);
    expect(await liveLeases(user.id)).toBe(10);
    const onTrpc = await openOnTrpc(pair, token);
    expect(onTrpc.refusal?.data).toMatchObject({ code: 'rate_limited', httpStatus: 429 });
  }, 120_000);
});
