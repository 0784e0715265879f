/**
 * What this process sees of its database, for /healthz and /metrics (API-CONTRACT.md §17):
 *
 * - `primary`: it answers and takes writes;
 * - `read-only`: it answers but takes no write (a standby, a demoted primary a proxy still
 *   leads to, `default_transaction_read_only`): writes are 503 until a primary is back;
 * - `unreachable`: it does not answer (no primary elected yet, the server down);
 * - `unknown`: not looked at yet.
 *
 * A probe (one statement, bounded by `PROBE_TIMEOUT_MS`) reads whether the server is
 * read-only and, on a primary, its timeline (the first 8 hex digits of its current WAL file's
 * name): each promotion starts a new timeline, so a timeline higher than the last one seen is
 * a failover, whichever node won it and however the process learnt of it. A restart of the
 * same primary (crash recovery) keeps its timeline and is not counted. /healthz and /readyz
 * probe; a request answered 503 because of the database updates the role from its error and
 * asks for a probe soon after (at most one a second), so the way back is seen without waiting
 * for a health check.
 */

export type DatabaseRole = 'primary' | 'read-only' | 'unreachable';

/** The probe: one statement, the same through a pooler (it leaves nothing on the session). */
export const ROLE_PROBE_SQL =
  "select (pg_is_in_recovery() or current_setting('transaction_read_only') = 'on') as read_only, " +
  'case when pg_is_in_recovery() then null else pg_walfile_name(pg_current_wal_lsn()) end as wal_file';

/** A probe slower than this counts as unreachable: /healthz answers within it. */
export const PROBE_TIMEOUT_MS = 1_000;
/** Probes asked for by failed requests come at most this often. */
const PROBE_AFTER_FAILURE_MS = 1_000;

export interface RoleObserver {
  role?(role: DatabaseRole): void;
  failover?(): void;
  unavailable?(): void;
}

export interface DatabaseState {
  role: DatabaseRole | 'unknown';
  /** Timelines seen to rise since this process started. */
  failovers: number;
  /** Requests this process answered 503 because the database could not serve them. */
  unavailable: number;
}

type ProbeRow = { read_only: boolean | string; wal_file: string | null };

export class DatabaseRoleWatch {
  #role: DatabaseRole | 'unknown' = 'unknown';
  #timeline: number | undefined;
  #failovers = 0;
  #unavailable = 0;
  #observers: RoleObserver[] = [];
  #probing: Promise<DatabaseRole> | undefined;
  #lastAsked = -Infinity;
  #stopped = false;

  /** `run` sends ROLE_PROBE_SQL and returns its one row. */
  constructor(private readonly run: (sql: string) => Promise<ProbeRow[]>) {}

  get state(): DatabaseState {
    return { role: this.#role, failovers: this.#failovers, unavailable: this.#unavailable };
  }

  observe(observer: RoleObserver): void {
    this.#observers.push(observer);
  }

  /** Reads the role now (one probe at a time; callers at once share it). */
  probe(): Promise<DatabaseRole> {
    this.#probing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const row = await Promise.race([
          this.run(ROLE_PROBE_SQL).then((rows) => rows[0]),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`the database did not answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
          }),
        ]);
        if (!row) throw new Error('the role probe returned no row');
        const readOnly = row.read_only === true || row.read_only === 't';
        if (!readOnly && row.wal_file) this.#sawTimeline(Number.parseInt(row.wal_file.slice(0, 8), 16));
        this.#set(readOnly ? 'read-only' : 'primary');
      } catch (error) {
        this.#set((error as { code?: unknown }).code === '25006' ? 'read-only' : 'unreachable');
      } finally {
        clearTimeout(timer);
        this.#probing = undefined;
      }
      return this.#role as DatabaseRole;
    })();
    return this.#probing;
  }

  /**
   * A request was answered 503: `seen` is what its error said of the database (`read-only`
   * when the server refused a write as read-only, 25006; `unreachable` when it could not be
   * reached), undefined when the 503 was not the database's (the process is stopping). Counts
   * it, takes the role from it, and probes soon (a probe says when a primary is back, and
   * whether it is a new one).
   */
  noteUnavailable(seen: Exclude<DatabaseRole, 'primary'> | undefined): void {
    this.#unavailable += 1;
    for (const o of this.#observers) o.unavailable?.();
    if (seen === undefined) return;
    this.#set(seen);
    const now = Date.now();
    if (this.#stopped || now - this.#lastAsked < PROBE_AFTER_FAILURE_MS) return;
    this.#lastAsked = now;
    setTimeout(() => {
      if (!this.#stopped) void this.probe();
    }, PROBE_AFTER_FAILURE_MS).unref();
  }

  /** No more probes after failures (the process stops). */
  stop(): void {
    this.#stopped = true;
  }

  #sawTimeline(timeline: number): void {
    if (!Number.isSafeInteger(timeline)) return;
    if (this.#timeline !== undefined && timeline > this.#timeline) {
      this.#failovers += 1;
      for (const o of this.#observers) o.failover?.();
    }
    if (this.#timeline === undefined || timeline > this.#timeline) this.#timeline = timeline;
  }

  #set(role: DatabaseRole): void {
    if (role === this.#role) return;
    this.#role = role;
    for (const o of this.#observers) o.role?.(role);
  }
}
