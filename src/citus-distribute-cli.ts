/**
 * `npm run citus:distribute [-- --dry-run]`: lays the tables out on the Citus coordinator
 * that DATABASE_URL names (DATABASE_DIRECT_URL when set: the step wants the coordinator
 * itself, not a pooler), after `npm run migrate`, as src/db/data-layout.ts says
 * (src/db/citus-distribute.ts plans it). Reference tables first, then `users`, then the
 * user tables co-located with it; local tables are left as they are. A table Citus already
 * holds as planned is skipped, so the step may run again after each migration that adds a
 * table. `--dry-run` prints the statements, a script psql could run, and runs none.
 *
 * Exits 1 without changing anything when the database has no citus extension, is a worker,
 * breaks the layout, or holds a table otherwise than planned; 1 also when a statement fails
 * (those before it stay done: fix the cause and run the step again).
 */
import { loadConfig } from './config.js';
import { createLogger } from './core/logger.js';
import { openOrm } from './app/orm.js';
import { openDatabase } from './db/database.js';
import {
  DistributionRefused,
  citusInstalled,
  citusTables,
  describeCitusTable,
  describeLayout,
  describeStep,
  NODE_SETTINGS,
  distributionPlan,
  isCoordinator,
  laidOutAs,
  type CitusTable,
} from './db/citus-distribute.js';

const SCHEMA = 'public';
const USAGE = 'usage: npm run citus:distribute [-- --dry-run]';

const out = (line: string) => process.stdout.write(`${line}\n`);
const fail = (lines: string[]) => {
  for (const line of lines) process.stderr.write(`${line}\n`);
  process.exitCode = 1;
};

async function distribute(args: string[]): Promise<void> {
  const unknown = args.filter((arg) => arg !== '--dry-run');
  if (unknown.length > 0) {
    process.stderr.write(`unknown argument ${unknown.join(' ')}\n${USAGE}\n`);
    process.exitCode = 2;
    return;
  }
  const dryRun = args.includes('--dry-run');
  const config = loadConfig();
  if (!config.databaseUrl) {
    // Without DATABASE_URL the service runs on an embedded PostgreSQL, which has no Citus.
    return fail(['citus:distribute: DATABASE_URL is not set; it must name the Citus coordinator, on which `npm run migrate` has run.']);
  }
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    databaseDirectUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    logger: createLogger('silent'),
  });
  // One connection, so that the session's statement timeout lifted below holds for the next
  // statement: distributing a table that has rows copies them, longer than a request may take.
  const orm = await openOrm(database.directUrl, { migrate: false, poolSize: 1, behindPooler: false, preparedStatements: false });
  try {
    const em = orm.em.fork();
    const citus = await citusInstalled(em);
    if (!citus && !dryRun) {
      return fail([
        `citus:distribute: the citus extension is not installed in ${database.description}.`,
        'DATABASE_URL must name a Citus coordinator (`create extension citus`, workers added with citus_add_node). Nothing was changed.',
      ]);
    }
    if (citus && !(await isCoordinator(em))) {
      return fail([`citus:distribute: ${database.description} is a Citus worker; DATABASE_URL must name the coordinator. Nothing was changed.`]);
    }

    let plan;
    try {
      plan = await distributionPlan(em, SCHEMA);
    } catch (error) {
      if (!(error instanceof DistributionRefused)) throw error;
      return fail([
        `citus:distribute: the schema cannot be laid out as src/db/data-layout.ts says; nothing was changed:`,
        ...error.lines.map((line) => `  ${line}`),
      ]);
    }

    const existing = citus ? await citusTables(em, SCHEMA) : new Map<string, CitusTable>();
    const users = existing.get('users');
    const otherwise = plan.filter((step) => step.sql !== null && existing.has(step.table) && !laidOutAs(step, existing.get(step.table)!, users));
    if (otherwise.length > 0) {
      return fail([
        'citus:distribute: tables are already held by Citus otherwise than planned; nothing was changed:',
        ...otherwise.map((step) =>
          `  ${step.table}: ${describeCitusTable(existing.get(step.table)!)}; planned: ${describeLayout(step)}. ` +
          `Undo it (select undistribute_table('${step.table}')) and run the step again.`,
        ),
      ]);
    }

    out(`-- ${dryRun ? 'Dry run, nothing is run: the' : 'The'} layout of schema ${SCHEMA} on ${database.description}`);
    if (!citus) out('-- (the citus extension is not installed here: run these on a Citus coordinator)');
    const done = { laidOut: 0, skipped: 0, local: 0 };
    for (const step of plan) {
      if (step.sql === null) {
        out(`-- ${describeStep(step)}`);
        done.local++;
        continue;
      }
      const held = existing.get(step.table);
      if (held) {
        out(`-- ${step.table}: skipped, already ${describeCitusTable(held)}`);
        done.skipped++;
        continue;
      }
      out(`-- ${describeStep(step)}`);
      out(`${step.sql};`);
      if (dryRun) {
        done.laidOut++;
        continue;
      }
      try {
        await em.execute('set statement_timeout = 0');
        await em.execute(step.sql);
      } catch (error) {
        return fail([
          `citus:distribute: ${step.table} failed: ${(error as Error).message}`,
          `The ${done.laidOut + done.skipped} table(s) before it are laid out and will be skipped; fix the cause and run the step again.`,
        ]);
      }
      done.laidOut++;
    }
    out(`-- ${done.laidOut} ${dryRun ? 'to lay out' : 'laid out'}, ${done.skipped} already laid out, ${done.local} left local`);
    out('-- The database on every node: no JIT (src/db/citus-distribute.ts NODE_SETTINGS)');
    for (const sql of NODE_SETTINGS) {
      out(`${sql};`);
      if (dryRun || !citus) continue;
      try {
        await em.execute(sql);
      } catch (error) {
        return fail([`citus:distribute: the tables are laid out, but the setting failed: ${(error as Error).message}`]);
      }
    }
  } finally {
    await orm.close(true);
    await database.stop();
  }
}

await distribute(process.argv.slice(2));
