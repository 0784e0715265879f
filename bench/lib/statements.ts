/**
 * SQL statements per request, measured in-process: the real Express app (createApp) on an
 * ORM opened with an `onQuery` hook, on the bench database. Requests are sent one at a
 * time, so every statement logged between a request's start and its response's end
 * belongs to it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MikroORM } from '@mikro-orm/postgresql';
import { systemClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { openOrm } from '../../src/app/orm.js';
import { createApp } from '../../src/http/app.js';

export interface CountedResponse {
  status: number;
  text: string;
  /** Statements the request issued, as logged by the ORM (without the "[query] " prefix). */
  sql: string[];
}

export interface CountingApp {
  request(method: string, path: string, token?: string, body?: unknown, extraHeaders?: Record<string, string>): Promise<CountedResponse>;
  close(): Promise<void>;
}

export async function startCountingApp(
  databaseUrl: string,
  rateLimits?: { authPerMinute: number; perMinute: number },
): Promise<CountingApp> {
  let log: string[] | null = null;
  const orm: MikroORM = await openOrm(databaseUrl, {
    migrate: false,
    poolSize: 4,
    onQuery: (line) => {
      if (log && line.startsWith('[query]')) log.push(line.slice('[query] '.length).replace(/\s+/g, ' '));
    },
  });
  const app = createApp({
    orm,
    clock: systemClock,
    logger: createLogger('silent'),
    trustProxy: false,
    passwordHashCost: 1024,
    rateLimits,
  });
  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    async request(method, path, token, body, extraHeaders) {
      const headers: Record<string, string> = { ...extraHeaders };
      if (token) headers.authorization = token;
      if (body !== undefined) headers['content-type'] = 'application/json';
      log = [];
      const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      const sql = log;
      log = null;
      return { status: res.status, text, sql };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await orm.close(true);
    },
  };
}

/** "3" when every request issued 3 statements, "3–5" otherwise. */
export function range(counts: number[]): string {
  if (counts.length === 0) return '—';
  const min = Math.min(...counts);
  const max = Math.max(...counts);
  return min === max ? String(min) : `${min}–${max}`;
}
