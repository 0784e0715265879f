/**
 * The distribution step (`npm run citus:distribute`): on a Citus coordinator, lays the tables
 * of one schema out as src/db/data-layout.ts says. `users` is distributed by `id`, every
 * table of user data by `user_id`, co-located with `users`; the tables NOT_USER_DATA names
 * become reference tables or stay local on the coordinator.
 *
 * The plan is read from PostgreSQL's catalogue with the rules of data-layout.ts, never from a
 * list of tables: a table with `user_id` added by a migration is distributed without anyone
 * naming it, and a table with no place in the layout stops the step (checkDataLayout runs
 * first, and any violation refuses it). The catalogue is read with the same bounds as
 * checkDataLayout (ordinary and partitioned tables of the schema, partitions judged by their
 * parent), so the two never disagree on which tables there are.
 *
 * Citus wants a table's foreign keys to point at tables it already manages, so the steps run:
 * reference tables first (each after the reference tables it points to), then `users`, then
 * each table of user data after the tables it references.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import {
  DISTRIBUTION_COLUMN,
  NOT_USER_DATA,
  USERS,
  checkDataLayout,
  type LayoutViolation,
  type NotUserData,
} from './data-layout.js';

export type DistributionKind = 'distributed' | 'reference' | 'local';

export interface DistributionStep {
  table: string;
  kind: DistributionKind;
  /** The distribution column (`distributed` only). */
  column?: string;
  /** The table this one is co-located with (user data other than `users`). */
  colocateWith?: string;
  /** The statement that lays the table out; null for a local table, which is left as it is. */
  sql: string | null;
  /** Unlogged: its rows are not in the write-ahead log (Citus keeps its shards unlogged too). */
  unlogged: boolean;
}

/** The step cannot run: why, one line each (the layout's violations, or what Citus would refuse). */
export class DistributionRefused extends Error {
  constructor(
    readonly lines: string[],
    readonly violations: LayoutViolation[] = [],
  ) {
    super(lines.join('\n'));
    this.name = 'DistributionRefused';
  }
}

interface TableRow {
  table: string;
  unlogged: boolean;
  has_user_id: boolean;
}

interface KeyRow {
  table: string;
  name: string;
  referenced: string;
}

const PLAIN_NAME = /^[a-z_][a-z0-9_$]*$/;
const identifier = (name: string) => (PLAIN_NAME.test(name) ? name : `"${name.replaceAll('"', '""')}"`);
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** A table's name as Citus reads it (a regclass in a string): bare in `public`, else qualified. */
export function tableName(schema: string, table: string): string {
  return literal(schema === 'public' ? identifier(table) : `${identifier(schema)}.${identifier(table)}`);
}

/**
 * Orders `tables` so that each comes after the tables of `tables` it references (a key to
 * itself aside), ties by name. Throws when keys form a circle: Citus could not lay out
 * either table first.
 */
function parentsFirst(tables: string[], keys: KeyRow[]): string[] {
  const among = new Set(tables);
  const parents = new Map(tables.map((t) => [t, new Set<string>()]));
  for (const key of keys) {
    if (among.has(key.table) && among.has(key.referenced) && key.table !== key.referenced) parents.get(key.table)!.add(key.referenced);
  }
  const ordered: string[] = [];
  const placed = new Set<string>();
  while (ordered.length < tables.length) {
    const ready = tables.filter((t) => !placed.has(t) && [...parents.get(t)!].every((p) => placed.has(p))).sort();
    if (ready.length === 0) {
      const left = tables.filter((t) => !placed.has(t)).sort();
      throw new DistributionRefused([
        `the foreign keys among ${left.join(', ')} form a circle: no table of it can be laid out before the others ` +
          '(Citus checks each key when its table is distributed)',
      ]);
    }
    for (const table of ready) {
      ordered.push(table);
      placed.add(table);
    }
  }
  return ordered;
}

/**
 * The steps that lay `schema` out as data-layout.ts says, in the order they must run. Refuses
 * (DistributionRefused) when checkDataLayout finds anything, or when Citus would refuse a step
 * that the layout allows (a reference table keyed to a local one, keys in a circle).
 */
export async function distributionPlan(
  em: SqlEntityManager,
  schema = 'public',
  notUserData: Readonly<Record<string, NotUserData>> = NOT_USER_DATA,
): Promise<DistributionStep[]> {
  const violations = await checkDataLayout(em, schema, notUserData);
  if (violations.length > 0) {
    throw new DistributionRefused(
      violations.map((v) => `${v.table}: ${v.rule} (${v.object}): ${v.detail}`),
      violations,
    );
  }

  const tables = await em.execute<TableRow[]>(
    `select c.relname::text as "table", c.relpersistence = 'u' as "unlogged",
            exists (select 1 from pg_attribute a
                     where a.attrelid = c.oid and a.attname = ? and a.attnum > 0 and not a.attisdropped) as "has_user_id"
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ? and c.relkind in ('r', 'p') and not c.relispartition`,
    [DISTRIBUTION_COLUMN, schema],
  );
  const keys = await em.execute<KeyRow[]>(
    `select c.relname::text as "table", con.conname::text as "name", p.relname::text as "referenced"
       from pg_constraint con
       join pg_class c on c.oid = con.conrelid
       join pg_namespace n on n.oid = c.relnamespace
       join pg_class p on p.oid = con.confrelid
      where con.contype = 'f' and con.conparentid = 0 and n.nspname = ? and not c.relispartition`,
    [schema],
  );

  const kindOf = (table: string): DistributionKind | 'users' =>
    table === USERS.table ? 'users' : (notUserData[table]?.kind ?? 'distributed');
  const unlogged = new Set(tables.filter((t) => t.unlogged).map((t) => t.table));
  const names = tables.map((t) => t.table);
  const ofKind = (kind: DistributionKind | 'users') => names.filter((t) => kindOf(t) === kind);

  // The layout lets a reference table point to a local one; Citus does not (the rows it
  // references would be on the coordinator only).
  const toLocal = keys.filter((k) => kindOf(k.table) === 'reference' && kindOf(k.referenced) === 'local');
  if (toLocal.length > 0) {
    throw new DistributionRefused(
      toLocal.map((k) => `${k.table}: foreign key ${k.name} points to ${k.referenced}, a local table; Citus lets a reference table point only to reference tables`),
    );
  }

  const q = (table: string) => tableName(schema, table);
  const steps: DistributionStep[] = [];
  for (const table of parentsFirst(ofKind('reference'), keys)) {
    steps.push({ table, kind: 'reference', sql: `select create_reference_table(${q(table)})`, unlogged: unlogged.has(table) });
  }
  if (names.includes(USERS.table)) {
    steps.push({
      table: USERS.table,
      kind: 'distributed',
      column: USERS.column,
      sql: `select create_distributed_table(${q(USERS.table)}, ${literal(USERS.column)})`,
      unlogged: unlogged.has(USERS.table),
    });
  }
  for (const table of parentsFirst(ofKind('distributed'), keys)) {
    steps.push({
      table,
      kind: 'distributed',
      column: DISTRIBUTION_COLUMN,
      colocateWith: USERS.table,
      sql: `select create_distributed_table(${q(table)}, ${literal(DISTRIBUTION_COLUMN)}, colocate_with => ${q(USERS.table)})`,
      unlogged: unlogged.has(table),
    });
  }
  for (const table of ofKind('local').sort()) steps.push({ table, kind: 'local', sql: null, unlogged: unlogged.has(table) });
  return steps;
}

/** Whether the `citus` extension is installed in the database `em` is connected to. */
export async function citusInstalled(em: SqlEntityManager): Promise<boolean> {
  const rows = await em.execute<Array<{ installed: boolean }>>(
    `select exists (select 1 from pg_extension where extname = 'citus') as "installed"`,
  );
  return rows[0]?.installed === true;
}

/** Whether this node is a Citus coordinator (group 0), not a worker. Only with citus installed. */
export async function isCoordinator(em: SqlEntityManager): Promise<boolean> {
  const rows = await em.execute<Array<{ group: number }>>(`select groupid as "group" from pg_dist_local_group`);
  return rows[0]?.group === 0;
}

/** How Citus already holds a table of the schema (`pg_dist_partition`). */
export interface CitusTable {
  table: string;
  kind: 'distributed' | 'reference' | 'citus local' | 'other';
  /** The distribution column of a distributed table. */
  column: string | null;
  colocationId: number;
}

/** The tables of `schema` Citus already manages. Only with citus installed. */
export async function citusTables(em: SqlEntityManager, schema = 'public'): Promise<Map<string, CitusTable>> {
  const rows = await em.execute<Array<{ table: string; method: string; replication: string; column: string | null; colocation: number }>>(
    `select c.relname::text as "table", d.partmethod::text as "method", d.repmodel::text as "replication",
            case when d.partkey is not null then column_to_column_name(d.logicalrelid, d.partkey) end as "column",
            d.colocationid as "colocation"
       from pg_dist_partition d
       join pg_class c on c.oid = d.logicalrelid
       join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = ?`,
    [schema],
  );
  return new Map(
    rows.map((r) => {
      const kind: CitusTable['kind'] =
        r.method === 'h' ? 'distributed' : r.method === 'n' && r.replication === 't' ? 'reference' : r.method === 'n' ? 'citus local' : 'other';
      return [r.table, { table: r.table, kind, column: r.column, colocationId: Number(r.colocation) }];
    }),
  );
}

/**
 * Whether `existing` is the layout `step` asks for; a distributed table other than `users`
 * must also share the co-location group of `users`.
 */
export function laidOutAs(step: DistributionStep, existing: CitusTable, users: CitusTable | undefined): boolean {
  if (step.kind === 'reference') return existing.kind === 'reference';
  if (step.kind === 'local') return true;
  if (existing.kind !== 'distributed' || existing.column !== step.column) return false;
  return step.colocateWith === undefined || (users !== undefined && existing.colocationId === users.colocationId);
}

export function describeCitusTable(existing: CitusTable): string {
  return existing.kind === 'distributed'
    ? `distributed by ${existing.column} (co-location group ${existing.colocationId})`
    : `a ${existing.kind} table`;
}

/** What a step makes of its table, in words. */
export function describeLayout(step: DistributionStep): string {
  if (step.kind === 'local') return 'left local on the coordinator, as it is';
  if (step.kind === 'reference') return 'a reference table, a copy on every node';
  return `distributed by ${step.column}${step.colocateWith ? `, co-located with ${step.colocateWith}` : ''}`;
}

export function describeStep(step: DistributionStep): string {
  return `${step.table}${step.unlogged ? ' (unlogged)' : ''}: ${describeLayout(step)}`;
}

/**
 * Settings of the database on every node, set by the step after the tables (a coordinator
 * passes `alter database … set` on to its workers; new sessions take it). `jit = off`: a write
 * made in one statement reaches a worker as several steps (Citus runs each data-modifying CTE
 * on its own and hands its rows to the next as an intermediate result), and the worker plans a
 * step that reads such a result for the 1,000 rows it guesses, not the one it holds: over the
 * JIT threshold, it compiled each such step, 220–310 ms of a write that otherwise takes 40 (a
 * task created in a project, on Citus 13.2). The service's statements are short and many; none
 * gains from JIT.
 */
export const NODE_SETTINGS: readonly string[] = [
  "do $$ begin execute format('alter database %I set jit = off', current_database()); end $$",
];
