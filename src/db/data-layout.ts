/**
 * How the tables split by user, should the database be sharded by user (Citus: "Past one
 * machine"). `users` is distributed by its `id`; every other table of user data by `user_id`,
 * so that one user's rows of every table sit together on one node. That holds only if:
 * - the table's primary key includes that column, and so does each unique constraint, unique
 *   index and exclusion constraint (a node can only check uniqueness among its own rows);
 * - a foreign key between two such tables pairs the child's `user_id` with the parent's
 *   (`users.id` for `users`), and does not set that column to null or a default on a change
 *   of the parent (Citus refuses both);
 * - no table outside user data points into it (a reference table, copied to every node, or a
 *   local one cannot reference rows split across nodes), and user data points only to
 *   reference tables outside it.
 *
 * And Citus distributes a table (of user data, or a reference table) only if:
 * - it has no trigger (Citus refuses one unless told to run them unsafely; the checks of
 *   foreign keys, PostgreSQL's own internal triggers, are not triggers in this sense);
 * - each id it holds is bigint: a column named `id` in its primary key, `user_id` or any
 *   `…_id` column, and every identity column (with its sequence), if it is a smallint or an
 *   integer. Citus lets each node hand out values of an identity column, from a range of its
 *   own, only when it is bigint; an id and the columns that refer to it keep one type. Ids of
 *   another kind (text, uuid) are not numbered, and pass.
 * Local tables stay on the coordinator, as PostgreSQL tables: neither applies to them.
 *
 * A table that is not user data is named in NOT_USER_DATA with why, as a reference table (a
 * copy on every node) or a local one (on the coordinator only). Any other table without a
 * `user_id` breaks the layout: a new table has to say which it is.
 *
 * `checkDataLayout` reads PostgreSQL's catalogue for one schema and lists what breaks these
 * rules; test/rules/citus-ready-schema.test.ts runs it on the migrated schema.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';

/** The column every table of user data other than `users` is distributed by. */
export const DISTRIBUTION_COLUMN = 'user_id';
/** `users` is distributed by its own key: the column `user_id` refers to everywhere. */
export const USERS = { table: 'users', column: 'id' } as const;

export interface NotUserData {
  kind: 'reference' | 'local';
  reason: string;
}

/** Every table that is not split by user, and why. */
export const NOT_USER_DATA: Readonly<Record<string, NotUserData>> = {
  usernames: {
    kind: 'reference',
    reason:
      'The directory of usernames (name → user id): a name is unique across all users, so it cannot be split by user. ' +
      'Small, written once per registration, read by a login.',
  },
  rate_limit_hits: {
    kind: 'local',
    reason:
      'Request counters per client key (a digest of an address, a login name or a token), not user data: many keys ' +
      'belong to no user. Unlogged, a minute long; every instance counts against the same rows.',
  },
  mikro_orm_migrations: {
    kind: 'local',
    reason: "The migrations applied to the schema: the schema's own bookkeeping, not user data.",
  },
};

export type LayoutRule =
  /** A table with no `user_id` that is not listed as reference or local, or listed and missing. */
  | 'placement'
  /** `user_id` of another type than `users.id`: the tables could not be co-located. */
  | 'distribution-type'
  /** No primary key, or one without the distribution column. */
  | 'primary-key'
  /** A unique constraint or index, or an exclusion constraint, without the distribution column. */
  | 'unique'
  /** A foreign key that does not pair the distribution columns, or crosses from or into user data wrongly. */
  | 'foreign-key'
  /** A foreign key between user tables that sets null or a default on a change of its parent. */
  | 'foreign-key-action'
  /** A trigger on a table that is not local. */
  | 'trigger'
  /** An id, a column that refers to one, or an identity column (or its sequence) narrower than bigint, on a table that is not local. */
  | 'id-type';

export interface LayoutViolation {
  table: string;
  rule: LayoutRule;
  /** The constraint, index, trigger or column at fault, or the table itself. */
  object: string;
  detail: string;
}

interface ColumnRow {
  table: string;
  column: string | null;
  type: string | null;
  identity: boolean | null;
  /** The type of the sequence that fills the column (identity or serial), if one does. */
  sequence_type: string | null;
}

interface TriggerRow {
  table: string;
  name: string;
}

/** Integer types narrower than bigint. */
const NARROW_INTEGERS = new Set(['smallint', 'integer']);

interface IndexRow {
  table: string;
  name: string;
  primary: boolean;
  exclusion: boolean;
  columns: string[] | null;
}

interface ForeignKeyRow {
  table: string;
  name: string;
  columns: string[];
  referenced_schema: string;
  referenced: string;
  referenced_columns: string[];
  on_delete: string;
  on_update: string;
}

type Role = 'users' | 'user data' | 'reference' | 'local' | 'unplaced';

const aTable = (role: Role | undefined) =>
  role === 'reference' || role === 'local' ? `a ${role} table` : 'a table of no place in the layout';

const aTableToDistribute = (role: Role | undefined) =>
  role === 'reference' ? 'a reference table' : role === 'unplaced' ? 'a table of no place in the layout' : 'a table of user data';

/**
 * What in `schema` breaks the layout above, given the tables `notUserData` names (by default
 * the service's list). Partitions are judged by their parent.
 */
export async function checkDataLayout(
  em: SqlEntityManager,
  schema: string,
  notUserData: Readonly<Record<string, NotUserData>> = NOT_USER_DATA,
): Promise<LayoutViolation[]> {
  const columns = await em.execute<ColumnRow[]>(
    `select c.relname::text as "table", a.attname::text as "column", format_type(a.atttypid, a.atttypmod) as "type",
            a.attidentity <> '' as "identity",
            (select format_type(s.seqtypid, null) from pg_depend d join pg_sequence s on s.seqrelid = d.objid
              where d.classid = 'pg_class'::regclass and d.refclassid = 'pg_class'::regclass
                and d.refobjid = c.oid and d.refobjsubid = a.attnum and d.deptype in ('a', 'i')
              limit 1) as "sequence_type"
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       left join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
      where n.nspname = ? and c.relkind in ('r', 'p') and not c.relispartition`,
    [schema],
  );
  // Triggers of the schema's tables, a partition's under its partitioned table; not PostgreSQL's
  // internal ones (foreign-key checks), nor the copies a partitioned table's trigger makes on
  // its partitions.
  const triggers = await em.execute<TriggerRow[]>(
    `select r.relname::text as "table", t.tgname::text as "name"
       from pg_trigger t
       join pg_class c on c.oid = t.tgrelid
       join pg_namespace n on n.oid = c.relnamespace
       join pg_class r on r.oid = coalesce(pg_partition_root(c.oid), c.oid)
      where n.nspname = ? and c.relkind in ('r', 'p') and not t.tgisinternal and t.tgparentid = 0`,
    [schema],
  );
  // The key columns of each primary key, unique index (constraint or not) and exclusion
  // constraint; an expression in a key has no column and never counts as the distribution column.
  const indexes = await em.execute<IndexRow[]>(
    `select c.relname::text as "table", coalesce(con.conname, i.relname)::text as "name",
            x.indisprimary as "primary", x.indisexclusion as "exclusion",
            (select array_agg(a.attname::text order by k.n)
               from unnest(x.indkey::int2[]) with ordinality as k(attnum, n)
               join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.attnum
              where k.n <= x.indnkeyatts) as "columns"
       from pg_index x
       join pg_class c on c.oid = x.indrelid
       join pg_namespace n on n.oid = c.relnamespace
       join pg_class i on i.oid = x.indexrelid
       left join pg_constraint con on con.conindid = x.indexrelid and con.conrelid = x.indrelid and con.contype in ('p', 'u', 'x')
      where n.nspname = ? and c.relkind in ('r', 'p') and not c.relispartition
        and (x.indisunique or x.indisexclusion)`,
    [schema],
  );
  const foreignKeys = await em.execute<ForeignKeyRow[]>(
    `select c.relname::text as "table", con.conname::text as "name",
            (select array_agg(a.attname::text order by k.n) from unnest(con.conkey) with ordinality as k(attnum, n)
               join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum) as "columns",
            pn.nspname::text as "referenced_schema", p.relname::text as "referenced",
            (select array_agg(a.attname::text order by k.n) from unnest(con.confkey) with ordinality as k(attnum, n)
               join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.attnum) as "referenced_columns",
            con.confdeltype::text as "on_delete", con.confupdtype::text as "on_update"
       from pg_constraint con
       join pg_class c on c.oid = con.conrelid
       join pg_namespace n on n.oid = c.relnamespace
       join pg_class p on p.oid = con.confrelid
       join pg_namespace pn on pn.oid = p.relnamespace
      where con.contype = 'f' and con.conparentid = 0 and n.nspname = ? and not c.relispartition`,
    [schema],
  );

  const tables = new Map<string, Map<string, string>>();
  for (const row of columns) {
    const table = tables.get(row.table) ?? new Map<string, string>();
    if (row.column !== null) table.set(row.column, row.type ?? '');
    tables.set(row.table, table);
  }

  const violations: LayoutViolation[] = [];
  const violation = (table: string, rule: LayoutRule, object: string, detail: string) => violations.push({ table, rule, object, detail });

  const roles = new Map<string, Role>();
  for (const [table, tableColumns] of tables) {
    if (table === USERS.table) roles.set(table, 'users');
    else if (notUserData[table]) roles.set(table, notUserData[table].kind);
    else if (tableColumns.has(DISTRIBUTION_COLUMN)) roles.set(table, 'user data');
    else {
      roles.set(table, 'unplaced');
      violation(table, 'placement', table,
        `has no ${DISTRIBUTION_COLUMN} and is not listed as a reference or local table (with why) in src/db/data-layout.ts`);
    }
  }
  for (const [table, { kind }] of Object.entries(notUserData)) {
    if (!tables.has(table)) violation(table, 'placement', table, `is listed as a ${kind} table but does not exist`);
  }

  const distributionColumnOf = (table: string) => (roles.get(table) === 'users' ? USERS.column : DISTRIBUTION_COLUMN);
  const isSplit = (table: string) => roles.get(table) === 'users' || roles.get(table) === 'user data';
  const usersKeyType = tables.get(USERS.table)?.get(USERS.column);

  for (const table of tables.keys()) {
    if (!isSplit(table)) continue;
    const column = distributionColumnOf(table);
    const type = tables.get(table)!.get(column);
    if (roles.get(table) === 'user data' && usersKeyType !== undefined && type !== usersKeyType) {
      violation(table, 'distribution-type', table, `${column} is ${type}, ${USERS.table}.${USERS.column} is ${usersKeyType}`);
    }
    const own = indexes.filter((index) => index.table === table);
    const primary = own.find((index) => index.primary);
    if (!primary) violation(table, 'primary-key', table, `has no primary key; it needs one that includes ${column}`);
    else if (!primary.columns?.includes(column)) {
      violation(table, 'primary-key', primary.name, `primary key (${(primary.columns ?? []).join(', ')}) does not include ${column}`);
    }
    for (const index of own) {
      if (index.primary || index.columns?.includes(column)) continue;
      violation(table, 'unique', index.name,
        `${index.exclusion ? 'exclusion constraint' : 'unique'} on (${(index.columns ?? ['an expression']).join(', ')}) does not include ${column}`);
    }
  }

  for (const key of foreignKeys) {
    const pairs = key.columns.map((column, i) => `${column} → ${key.referenced}.${key.referenced_columns[i]}`).join(', ');
    if (key.referenced_schema !== schema) {
      violation(key.table, 'foreign-key', key.name, `references ${key.referenced_schema}.${key.referenced}, outside the schema`);
      continue;
    }
    const from = roles.get(key.table);
    const to = roles.get(key.referenced);
    if (isSplit(key.table) && isSplit(key.referenced)) {
      const child = distributionColumnOf(key.table);
      const parent = distributionColumnOf(key.referenced);
      const at = key.columns.indexOf(child);
      if (at < 0 || key.referenced_columns[at] !== parent) {
        violation(key.table, 'foreign-key', key.name, `(${pairs}) does not pair ${child} with ${key.referenced}.${parent}`);
      } else if (['n', 'd'].includes(key.on_delete) || ['n', 'd'].includes(key.on_update)) {
        violation(key.table, 'foreign-key-action', key.name,
          `(${pairs}) sets null or a default when its parent changes; Citus refuses that on a key with the distribution column`);
      }
    } else if (isSplit(key.referenced)) {
      violation(key.table, 'foreign-key', key.name, `${aTable(from)} references user data (${pairs}), whose rows are split across nodes`);
    } else if (isSplit(key.table) && to !== 'reference') {
      violation(key.table, 'foreign-key', key.name, `user data references ${aTable(to)} (${pairs}); only reference tables are on every node`);
    }
  }

  for (const trigger of triggers) {
    if (roles.get(trigger.table) === 'local') continue;
    violation(trigger.table, 'trigger', trigger.name,
      `${aTableToDistribute(roles.get(trigger.table))} has a trigger; Citus distributes no table that has one`);
  }

  const primaryKeyColumns = new Map(indexes.filter((index) => index.primary).map((index) => [index.table, index.columns ?? []]));
  for (const row of columns) {
    if (row.column === null || roles.get(row.table) === 'local') continue;
    const isId = row.column.endsWith('_id') || row.identity === true ||
      (row.column === 'id' && (primaryKeyColumns.get(row.table) ?? []).includes('id'));
    if (!isId) continue;
    if (NARROW_INTEGERS.has(row.type ?? '')) {
      violation(row.table, 'id-type', row.column, `${row.column} is ${row.type}; an id and each column that refers to one are bigint`);
    } else if (NARROW_INTEGERS.has(row.sequence_type ?? '')) {
      violation(row.table, 'id-type', row.column, `the sequence of ${row.column} is ${row.sequence_type}; it must be bigint`);
    }
  }

  return violations.sort((a, b) => a.table.localeCompare(b.table) || a.rule.localeCompare(b.rule) || a.object.localeCompare(b.object));
}
