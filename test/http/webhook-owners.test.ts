/**
 * Which writes wake a process's webhook deliverer (src/webhooks/deliverer.ts `#owners`): a
 * write's notification makes it look for due webhooks only when the process knows the user
 * has webhooks (read at its start, or made here); a webhook made by another process is found
 * by the round over every user. Two deliverers stand for two processes: `here` is the one the
 * app's webhook procedures wake, `elsewhere` is not told. Notifications are handed to both by
 * the test, as the event hub would, and each deliverer's work is counted by its entity
 * manager's forks (one per step: the owners' read, a claim; a claim may send several statements).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { WebhookDeliverer, type Heard } from '../../src/webhooks/deliverer.js';
import { eventually } from '../helpers/eventually.js';
import { useTestAppWithSql } from '../helpers/test-app.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

interface Process {
  deliverer: WebhookDeliverer;
  /** Entity managers this process's deliverer forked: one per step that reads or claims. */
  statements(): number;
  hear(heard: Heard): void;
}

const processes: Process[] = [];
let here: Process;
const { app, db } = useTestAppWithSql({ webhooks: { allowPrivateUrls: true, wake: (userId) => here?.deliverer.wake(userId) } });
let receiver: Receiver;

/** `failing`: the first statements this many of its statements fail (the database out of reach). */
async function startProcess(failing = 0): Promise<Process> {
  let statements = 0;
  const listeners: Array<(heard: Heard) => void> = [];
  const deliverer = new WebhookDeliverer({
    em: () => {
      statements += 1;
      if (statements <= failing) throw new Error('the database is out of reach');
      return app.orm.em.fork();
    },
    notifications: {
      watch: async (listener) => {
        listeners.push(listener);
        return () => undefined;
      },
    },
    config: { retrySchedule: [3_600], timeoutMs: 5_000, allowPrivateUrls: true },
    log: createLogger('silent'),
    // No round over every user but those the test asks for (`wake(null)`).
    pollMs: 3_600_000,
  });
  await deliverer.start();
  // The round over every user it starts with (reading the users with webhooks) is over before a test counts.
  await settled();
  const process = { deliverer, statements: () => statements, hear: (heard: Heard) => listeners.forEach((l) => l(heard)) };
  processes.push(process);
  return process;
}

/** Lets a round the deliverer scheduled (on the next turn of the event loop) start and end. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

beforeAll(async () => {
  receiver = await startReceiver();
  here = await startProcess();
});
afterAll(async () => {
  for (const p of processes) await p.deliverer.stop();
  await receiver?.close();
});

async function taskCreated(token: string, label: string): Promise<void> {
  const res = await app.request('POST', '/api/users/me/tasks', { token, body: { task: { label } } });
  expect(res.status, res.text).toBe(201);
}

/** Once every lease on the user's webhooks is given back: no loop of a process goes on with their events. */
async function leasesGivenBack(userId: number): Promise<void> {
  await eventually(async () => (await db.query('select 1 from webhooks where user_id = $1 and lease_owner is not null', [userId])).rowCount === 0, {
    message: 'the leases were given back',
  });
}

/** The deliveries of the task.created event of the task labelled `label`. */
const delivered = (label: string) =>
  receiver.received.filter((r) => r.json.type === 'task.created' && (r.json.data as { attributes?: { label?: string } }).attributes?.label === label);

describe('the writes that wake a webhook deliverer', () => {
  it('a write of a user with no webhook sends no statement; one of a user whose webhook was made here is delivered at once', async () => {
    const elsewhere = await startProcess();
    const plain = await app.register();
    await taskCreated(plain.token, 'no webhook');
    const before = [here.statements(), elsewhere.statements()];
    here.hear({ userId: plain.id, first: 1n, last: 1n });
    elsewhere.hear({ userId: plain.id, first: 1n, last: 1n });
    await settled();
    expect([here.statements(), elsewhere.statements()]).toEqual(before);

    const owner = await app.register();
    const made = await app.request('POST', '/api/users/me/webhooks', { token: owner.token, body: { webhook: { url: receiver.url } } });
    expect(made.status, made.text).toBe(201);
    await taskCreated(owner.token, 'made here');
    const elsewhereBefore = elsewhere.statements();
    here.hear({ userId: owner.id, first: 1n, last: 1n });
    elsewhere.hear({ userId: owner.id, first: 1n, last: 1n });
    await eventually(() => delivered('made here').length === 1, { message: 'the event reached the receiver, woken by its notification' });
    // The other process was not told of the webhook: the notification is no reason for it to look.
    await settled();
    expect(elsewhere.statements()).toBe(elsewhereBefore);

    // Its round over every user finds the webhook due and learns of its user: from then on
    // the user's notifications wake it too.
    await leasesGivenBack(owner.id);
    await taskCreated(owner.token, 'found by the round');
    elsewhere.deliverer.wake(null);
    await eventually(() => delivered('found by the round').length === 1, { message: 'the round over every user delivered the event' });
    await settled();
    const learned = elsewhere.statements();
    elsewhere.hear({ userId: owner.id, first: 1n, last: 1n });
    await eventually(() => elsewhere.statements() > learned, { message: "the user's notification woke the other process" });
    expect(delivered('made here')).toHaveLength(1);
  });

  it('a process learns of a webhook made by another from its round over every user, also when nothing is due', async () => {
    const elsewhere = await startProcess();
    const owner = await app.register();
    const made = await app.request('POST', '/api/users/me/webhooks', { token: owner.token, body: { webhook: { url: receiver.url } } });
    expect(made.status, made.text).toBe(201);
    elsewhere.deliverer.wake(null);
    await settled();
    // Only the other process is told of the write (as when the one that made it is gone): it delivers it at once.
    await taskCreated(owner.token, 'maker gone');
    elsewhere.hear({ userId: owner.id, first: 1n, last: 1n });
    await eventually(() => delivered('maker gone').length === 1, { message: 'the other process delivered the event at its notification', timeout: 2_000 });
  });

  it('a notification heard while the users with webhooks are unknown does not make its user one of them', async () => {
    // The read of the round it starts with fails: until a round reads them, every notification wakes it.
    const outage = await startProcess(1);
    const plain = await app.register();
    await taskCreated(plain.token, 'during the outage');
    let before = outage.statements();
    outage.hear({ userId: plain.id, first: 1n, last: 1n });
    await eventually(() => outage.statements() > before, { message: 'the notification woke the process while the users with webhooks were unknown' });
    outage.deliverer.wake(null);
    await settled();
    before = outage.statements();
    outage.hear({ userId: plain.id, first: 1n, last: 1n });
    await settled();
    expect(outage.statements()).toBe(before);
  });

  it('a process that starts knows the users that have webhooks: their notifications wake it at once', async () => {
    const owner = await app.register();
    const made = await app.request('POST', '/api/users/me/webhooks', { token: owner.token, body: { webhook: { url: receiver.url } } });
    expect(made.status, made.text).toBe(201);
    const started = await startProcess();
    // Only the new process hears of the write.
    await taskCreated(owner.token, 'known at start');
    started.hear({ userId: owner.id, first: 1n, last: 1n });
    await eventually(() => delivered('known at start').length === 1, { message: 'the process started afterwards delivered the event at its notification' });
  });

  it('a user whose webhooks are all deleted is forgotten at the next round over every user: their notifications wake nothing', async () => {
    const owner = await app.register();
    const made = await app.request('POST', '/api/users/me/webhooks', { token: owner.token, body: { webhook: { url: receiver.url } } });
    expect(made.status, made.text).toBe(201);
    await taskCreated(owner.token, 'before the deletion');
    here.hear({ userId: owner.id, first: 1n, last: 1n });
    await eventually(() => delivered('before the deletion').length === 1, { message: 'the event reached the receiver while the webhook was there' });
    await leasesGivenBack(owner.id);
    const deleted = await app.request('DELETE', `/api/webhooks/${made.body.data.id}`, { token: owner.token });
    expect(deleted.status, deleted.text).toBe(204);

    // Until a round reads the users with webhooks again, the user is still one of them.
    let before = here.statements();
    here.hear({ userId: owner.id, first: 2n, last: 2n });
    await eventually(() => here.statements() > before, { message: 'the notification woke the process before its round' });
    await settled();
    // The round: its read of the users with webhooks, then its claim.
    before = here.statements();
    here.deliverer.wake(null);
    await eventually(() => here.statements() >= before + 2, { message: 'the round over every user ran' });
    await settled();
    before = here.statements();
    here.hear({ userId: owner.id, first: 3n, last: 3n });
    await settled();
    expect(here.statements()).toBe(before);
  });
});
