/**
 * A revoked token stops everywhere (API-CONTRACT.md §16): two instances of the service on one
 * database; a token revoked through one is refused by the other at once, and the event
 * streams it holds open on the other (REST and tRPC) end within 5 s, well before their idle
 * check (15 s): the revocation is announced to every instance (src/users/revocation.ts). And a
 * token racing its own revocation: no answer is a 500, and nothing sent after the 204 passes.
 */
import { describe, expect, it } from 'vitest';
import { openStream, openTrpcStream } from '../helpers/sse.js';
import { seconds, useTestApp, type TestApp } from '../helpers/test-app.js';

const IDLE_MS = 15_000;
const one = useTestApp({ eventsIdleMs: IDLE_MS });
// A second instance: its own event hub and pool, on the same database.
const two = useTestApp(() => ({ databaseUrl: one.databaseUrl, eventsIdleMs: IDLE_MS }));

async function personalToken(sessionToken: string, scopes: string[]): Promise<{ id: number; secret: string }> {
  const res = await one.request('POST', '/api/users/me/tokens', {
    token: sessionToken,
    body: { token: { name: 'streams', scopes, expires_at: seconds(one.clock.now().getTime()) + 86_400 } },
  });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, secret: res.body.meta.secret };
}

describe('revocation on one instance', () => {
  it('is refused by the other at once, and ends its streams there within 5 s (REST and tRPC)', async () => {
    const u = await one.register();
    expect((await one.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'first event' } } })).status).toBe(201);
    const token = await personalToken(u.token, ['events:read', 'tasks:read']);
    const rest = await openStream(`${two.baseUrl}/api/users/me/events?after=0`, { Authorization: token.secret });
    expect(rest.status).toBe(200);
    expect((await rest.nextEvent(5_000)).event).toBe('task.created');
    const trpc = await openTrpcStream(two.baseUrl, token.secret);
    expect(trpc.refusal).toBeNull();
    // Another stream of the same user, with another token, stays open.
    const other = await openStream(`${two.baseUrl}/api/users/me/events?after=0`, { Authorization: u.token });
    expect((await other.nextEvent(5_000)).event).toBe('task.created');

    const started = Date.now();
    expect((await one.request('DELETE', `/api/tokens/${token.id}`, { token: u.token })).status).toBe(204);
    expect((await two.request('GET', '/api/users/me/tasks', { token: token.secret })).status).toBe(401);
    const ended = (stream: { ended: Promise<void> }) =>
      Promise.race([stream.ended.then(() => Date.now() - started), new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 5_000))]);
    const [restMs, trpcMs] = await Promise.all([ended(rest), ended(trpc.stream)]);
    expect(restMs).toBeLessThan(5_000);
    expect(trpcMs).toBeLessThan(5_000);
    expect(two.events.streamsOf(token.secret)).toBe(0);
    // The other token's stream still hears the user's changes.
    expect((await one.request('POST', '/api/users/me/tasks', { token: u.token, body: { task: { label: 'second' } } })).status).toBe(201);
    expect((await other.nextEvent(5_000)).event).toBe('task.created');
    other.close();
  });

  it('logging out on one instance ends that token\'s streams on the other too', async () => {
    const u = await one.register();
    const login = await one.request('POST', '/api/users/authorizations', { body: { username: u.username, password: 'correct horse' } });
    const session: string = login.body.meta.token;
    const stream = await openStream(`${two.baseUrl}/api/users/me/events`, { Authorization: session });
    expect(stream.status).toBe(200);
    await stream.next(5_000);
    const started = Date.now();
    expect((await one.request('DELETE', '/api/users/me/authorizations/current', { token: session })).status).toBe(204);
    await Promise.race([stream.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the stream did not end within 5 s')), 5_000))]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('a token racing its own revocation', () => {
  it('no 500, and no request sent after the 204 passes, on either instance', async () => {
    const u = await one.register();
    const token = await personalToken(u.token, ['tokens:manage', 'tasks:write']);
    const sent: Array<Promise<{ status: number; sentAt: number }>> = [];
    const send = (app: TestApp, i: number) => {
      const sentAt = Date.now();
      sent.push(app.request('POST', '/api/users/me/tasks', { token: token.secret, body: { task: { label: `race ${i}` } } }).then((r) => ({ status: r.status, sentAt })));
    };
    for (let i = 0; i < 20; i++) send(i % 2 ? two : one, i);
    const revoked = one.request('DELETE', `/api/tokens/${token.id}`, { token: token.secret }).then((r) => ({ status: r.status, at: Date.now() }));
    for (let i = 20; i < 40; i++) send(i % 2 ? two : one, i);
    const revocation = await revoked;
    expect(revocation.status).toBe(204);
    const after: Array<Promise<{ status: number; sentAt: number }>> = [];
    for (let i = 0; i < 10; i++) {
      after.push(two.request('GET', '/api/users/me/tasks', { token: token.secret }).then((r) => ({ status: r.status, sentAt: Date.now() })));
    }
    const answers = await Promise.all(sent);
    expect(answers.every((a) => a.status === 201 || a.status === 401), JSON.stringify(answers)).toBe(true);
    expect((await Promise.all(after)).map((a) => a.status)).toEqual(Array(10).fill(401));
    // What passed is exactly what is stored: a 201 is a task, a 401 none.
    const list = await one.request('GET', '/api/users/me/tasks?page_size=100', { token: u.token });
    expect(list.body.data.filter((t: { attributes: { label: string } }) => t.attributes.label.startsWith('race')).length).toBe(answers.filter((a) => a.status === 201).length);
  });
});

