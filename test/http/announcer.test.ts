/**
 * The announcer (src/writes/announcer.ts): committed writes' NOTIFYs, sent after their
 * answers. Against the real database, with a LISTEN connection of its own: every payload
 * arrives, once and in the order handed over; those handed over while a statement is under way
 * share the next statement; a statement that fails drops its payloads without a rejection
 * (nothing unhandled), and the next ones go out; its statements belong to no request, even
 * when a request hands over the payload that starts them.
 */
import pg from 'pg';
import type { MikroORM } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm } from '../../src/app/orm.js';
import { countStatement, requestScope } from '../../src/core/request-scope.js';
import { Announcer, EVENTS_CHANNEL } from '../../src/writes/announcer.js';
import { eventually } from '../helpers/eventually.js';
import { createTestDatabase, directUrlOf } from '../helpers/test-app.js';

let orm: MikroORM;
let databaseUrl: string;
let listener: pg.Client;
const heard: string[] = [];
const statements: string[] = [];

beforeAll(async () => {
  const url = await createTestDatabase();
  databaseUrl = url;
  orm = await openOrm(url, {
    migrate: true,
    poolSize: 4,
    onQuery: (line) => {
      if (line.includes('pg_notify')) statements.push(line);
    },
  });
  listener = new pg.Client({ connectionString: directUrlOf(url) });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel === EVENTS_CHANNEL && n.payload?.startsWith('test:')) heard.push(n.payload);
  });
  await listener.query(`listen ${EVENTS_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
  await orm?.close(true);
});

describe('the announcer', () => {
  it('sends every payload once, in order; those handed over meanwhile share one statement', async () => {
    heard.length = 0;
    statements.length = 0;
    const announcer = new Announcer(() => orm.em.fork());
    // Odd texts too: quotes, backslashes, braces and commas are array syntax in PostgreSQL.
    const payloads = Array.from({ length: 450 }, (_, i) => `test:${i}:${i % 3 === 0 ? '{"a":"b\\\\c,\\"d\\"}"}' : 'plain'}`);
    for (const payload of payloads) announcer.announce(payload);
    await announcer.idle();
    await eventually(() => heard.length >= payloads.length, { message: 'every notification' });
    expect(heard).toEqual(payloads);
    // Handed over in one tick: statements of at most 200.
    expect(statements).toHaveLength(3);
    // Handed over while a statement is under way: the next one takes them all.
    heard.length = 0;
    statements.length = 0;
    announcer.announce('test:first');
    await Promise.resolve();
    await Promise.resolve(); // the first statement is under way now
    for (let i = 0; i < 20; i++) announcer.announce(`test:meanwhile ${i}`);
    await announcer.idle();
    await eventually(() => heard.length >= 21, { message: 'the notifications' });
    expect(heard).toEqual(['test:first', ...Array.from({ length: 20 }, (_, i) => `test:meanwhile ${i}`)]);
    expect(statements).toHaveLength(2);
    // `announce` resolves once its payload's statement is done (a graceful stop waits for it).
    statements.length = 0;
    await announcer.announce('test:awaited');
    expect(statements).toHaveLength(1);
    await eventually(() => heard.includes('test:awaited'), { message: 'the awaited notification' });
  });

  it('drops what it cannot send, without a rejection, and sends what comes next', async () => {
    heard.length = 0;
    let failing = true;
    const announcer = new Announcer(() => {
      if (failing) throw new Error('no connection');
      return orm.em.fork();
    });
    announcer.announce('test:lost');
    await announcer.idle();
    failing = false;
    // A statement the database refuses (a payload over its 8,000 bytes) drops its payloads too.
    announcer.announce(`test:too long ${'x'.repeat(8_000)}`);
    announcer.announce('test:lost with it');
    await announcer.idle();
    announcer.announce('test:after');
    await announcer.idle();
    await eventually(() => heard.length >= 1, { message: 'the notification after the failures' });
    expect(heard).toEqual(['test:after']);
  });

  it("sends in no request's scope, though a request hands the payload over", async () => {
    const counted = await openOrm(databaseUrl, { migrate: false, poolSize: 2, onStatement: countStatement });
    try {
      const announcer = new Announcer(() => counted.em.fork());
      const scope = { statements: 0, onRateLimitRefusal: () => undefined };
      await requestScope.run(scope, async () => {
        await counted.em.fork().getConnection().execute('select 1'); // the control: a request's own statement counts
        announcer.announce('test:scoped');
        await announcer.idle();
      });
      expect(scope.statements).toBe(1);
    } finally {
      await counted.close(true);
    }
  });
});
