/**
 * Webhook delivery through a database outage (API-CONTRACT.md §14, §17): a delivery whose
 * record the outage cut off (the receiver answered, the database was gone) is made again, with
 * the same `webhook-id`, as soon as the database is back, not when its lease ends (twice the
 * timeout and 10 s: 50 s here). A failover is such an outage, seen by the deliverer.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/core/logger.js';
import { startService, type RunningService } from '../../src/server.js';
import { eventually } from '../helpers/eventually.js';
import { call, registerUser } from '../helpers/http.js';
import { startOwnDatabase } from '../helpers/own-database.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

// Long enough that the held request outlasts stopping the database on a loaded machine.
const TIMEOUT_MS = 20_000;
const LEASE_MS = 2 * TIMEOUT_MS + 10_000;

let db: Awaited<ReturnType<typeof startOwnDatabase>> | undefined;
let service: RunningService | undefined;
let receiver: Receiver | undefined;
afterAll(async () => {
  await service?.stop().catch(() => undefined);
  await receiver?.close();
  await db?.remove();
});

describe('webhook delivery through a database outage', () => {
  it('makes a delivery the outage cut off again as soon as the database is back, not when its lease ends', async () => {
    db = await startOwnDatabase('planning-webhook-outage-');
    const config = {
      ...loadConfig({
        WEBHOOK_ALLOW_PRIVATE_URLS: '1',
        WEBHOOK_RETRY_SCHEDULE: '1,1,1',
        WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
        RATE_LIMIT_AUTH_PER_MINUTE: '0',
        RATE_LIMIT_PER_MINUTE: '0',
      }),
      databaseUrl: db.url,
      port: 0,
      host: '127.0.0.1',
      passwordHashCost: 1024,
    };
    service = await startService({ config, logger: createLogger('silent') });
    const base = service.url;
    const user = await registerUser(base, 'webhook_outage');
    const hooked = await startReceiver();
    receiver = hooked;
    // The first request is held until the database is gone; every later one is answered at once.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    hooked.respond(async (_request, res) => {
      if (first) {
        first = false;
        await held;
      }
      res.writeHead(204).end();
    });
    const created = await call(base, 'POST', '/api/users/me/webhooks', { token: user.token, body: { webhook: { url: hooked.url } } });
    expect(created.status, created.text).toBe(201);
    const task = await call(base, 'POST', '/api/users/me/tasks', { token: user.token, body: { task: { label: 'cut off' } } });
    expect(task.status, task.text).toBe(201);

    await eventually(() => hooked.received.length === 1, { timeout: 10_000, message: 'the first delivery arrived' });
    const claimedBy = hooked.received[0]!.arrivedAt;
    const eventId = hooked.received[0]!.json.id;
    await db.stop();
    release(); // answered 204, but its record cannot be written: the database is gone
    await eventually(() => hooked.accepted.length === 1, { timeout: 5_000, message: 'the held delivery answered' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await db.restart();
    const back = Date.now();

    await eventually(() => hooked.received.length >= 2, { timeout: LEASE_MS, interval: 50, message: 'the delivery made again' });
    const again = hooked.received[1]!;
    expect(again.json.id).toBe(eventId);
    expect(again.headers['webhook-id']).toBe(eventId);
    // Given back once the database answered: within a few seconds of its return, long before the lease's end.
    expect(again.arrivedAt - back).toBeLessThan(5_000);
    expect(again.arrivedAt - claimedBy).toBeLessThan(LEASE_MS - 10_000);
    // And recorded this time: the webhook's place is the event.
    await eventually(
      async () => (await call(base, 'GET', '/api/users/me/webhooks', { token: user.token })).body.data[0].attributes.lastEventId === eventId,
      { timeout: 10_000, message: 'the webhook recorded the event' },
    );
  }, 90_000);
});
