/** Stopping under load: requests in flight complete, nothing new is accepted. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/core/logger.js';
import { startService } from '../src/server.js';
import { createTestDatabase } from './helpers/test-app.js';

describe('graceful stop', () => {
  it('finishes in-flight requests and refuses new connections', async () => {
    const databaseUrl = await createTestDatabase();
    const config = { ...loadConfig({}), databaseUrl, port: 0, host: '127.0.0.1', rateLimitAuthPerMinute: 0 };
    const service = await startService({ config, logger: createLogger('silent') });

    // Registrations hash passwords with the production cost, so they are still running
    // when the stop begins.
    const inFlight = Array.from({ length: 16 }, (_, i) =>
      fetch(`${service.url}/api/users`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Connection: 'close' },
        body: JSON.stringify({ user: { username: `graceful${i}`, password: 'password1' } }),
      }).then(async (r) => ({ status: r.status, body: await r.json() })),
    );
    const connections = () => new Promise<number>((resolve, reject) => service.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
    while ((await connections()) < 16) await new Promise((r) => setImmediate(r));

    const stopping = service.stop();
    const results = await Promise.all(inFlight);
    expect(results.map((r) => r.status)).toEqual(Array(16).fill(201));
    await stopping;
    expect(service.server.listening).toBe(false);
    await expect(fetch(`${service.url}/healthz`)).rejects.toThrow();
  });
});
