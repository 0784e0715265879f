/**
 * docs/operations.md's deployment "Several instances behind HAProxy" for a bench: Debian's PostgreSQL 15
 * and PgBouncer in transaction mode with the pgbouncer.ini settings of docs/operations.md, its
 * instances (one per start line, with its environment: DATABASE_POOL_SIZE, TRUST_PROXY,
 * NODE_ENV) as the built service (`npm start`'s Node flags), and HAProxy on the page's
 * haproxy.cfg and error file. Only the ports, the files' paths and the database change, as in
 * test/helpers/deployment.ts (whose readers of that page this reuses); the instances are
 * the bench's children (startTarget) rather than the tests' (spawnService needs vitest), and
 * `env` goes over the page's environment. A haproxy.cfg `server` line with no instance
 * (the page starts three of four) points at a free port nobody listens on, as on the page.
 * Needs `postgresql-15`, `pgbouncer` and `haproxy` (docs/operations.md, "Behind a pooler").
 */
import pg from 'pg';
import {
  bouncerSettings, haproxyConfig, instanceEnv, instancePorts, readDeployment, startHaproxy,
} from '../../test/helpers/deployment.js';
import { freePort } from '../../test/helpers/net.js';
import { missingBinaries, startPooledDatabase } from '../../test/helpers/pooled-database.js';
import { sleep } from './env.js';
import { builtServiceArgs, startTarget, type Target } from './processes.js';
import type { Session } from './session.js';

export interface BenchDeployment {
  /** HAProxy's frontend: http://127.0.0.1:<port> */
  url: string;
  instances: Target[];
  /** PostgreSQL itself, for the bench's own reads. */
  directUrl: string;
  /** A client on PostgreSQL itself, closed at the end of the run. */
  direct: pg.Client;
  /** The environment every instance ran with (the page's, then `env`). */
  env: Record<string, string>;
  /** haproxy.cfg `server` lines / instances started. */
  slots: number;
}

/** What is missing on this machine for the deployment (empty when it can run). */
export const deploymentMissing = () => missingBinaries('postgres', 'pgbouncer', 'haproxy');

/** `postgres`: PostgreSQL settings over the pooled tests' (test/helpers/pooled-database.ts). */
export async function startDocumentedDeployment(
  session: Session,
  env: Record<string, string>,
  postgres: Record<string, string> = {},
): Promise<BenchDeployment> {
  const documented = readDeployment();
  const pooled = await startPooledDatabase({ bouncer: bouncerSettings(documented.ini), postgres });
  session.defer(() => pooled.stop());
  const database = await pooled.createDatabase('bench');
  const instanceEnvironment = {
    ...instanceEnv(documented.sh),
    DATABASE_URL: database.pooledUrl,
    DATABASE_DIRECT_URL: database.directUrl,
    ...env,
  };
  const count = instancePorts(documented.sh).length;
  const start = (i: number) => startTarget(session, { name: `instance ${i + 1}`, args: builtServiceArgs(), env: instanceEnvironment });
  // The first migrates; the others then find nothing to apply.
  const instances = [await start(0)];
  instances.push(...(await Promise.all(Array.from({ length: count - 1 }, (_, i) => start(i + 1)))));
  const slots = [...documented.haproxy.matchAll(/^\s*server\s/gm)].length;
  const ports = instances.map((t) => Number(new URL(t.url).port));
  while (ports.length < slots) ports.push(await freePort());
  const frontendPort = await freePort();
  const haproxy = await startHaproxy((errorFile) => haproxyConfig(documented.haproxy, { frontendPort, serverPorts: ports, errorFile }), documented.http, frontendPort);
  session.defer(() => haproxy.stop());
  // Every instance ready through HAProxy, and its checks settled on the empty slot (fall 2 at 1 s).
  for (let i = 0; i < 3 * instances.length; i++) {
    const res = await fetch(`${haproxy.url}/readyz`);
    if (res.status !== 200) throw new Error(`HAProxy answered /readyz ${res.status}`);
    await res.arrayBuffer();
  }
  await sleep(3_000);
  const direct = new pg.Client({ connectionString: database.directUrl });
  await direct.connect();
  session.defer(() => direct.end());
  return { url: haproxy.url, instances, directUrl: database.directUrl, direct, env: instanceEnvironment, slots };
}
