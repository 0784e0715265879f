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
 *
 * An outage: a request found the server gone (refused, reset, shut down, crashed), or could
 * not reach it while the last probe got no answer either (so not merely a busy pool). Until a
 * probe gets an answer again, `outage` is true and the app answers requests 503
 * at once, without a statement (src/http/app.ts): a request sent while no primary can be
 * reached would otherwise wait on a pooler or a proxy (PgBouncer's query_wait_timeout, a
 * connect timeout) for seconds. Probes come every `OUTAGE_PROBE_MS` meanwhile, so the service
 * serves again within about that much of a primary answering.
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
/** Probes during an outage come this often. */
export const OUTAGE_PROBE_MS = 250;

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
  #outage = false;
  #outageTimer: NodeJS.Timeout | undefined;
  /** When a probe last got no answer, and when one last got one (performance.now()). */
  #probeFailedAt = -Infinity;
  #probeAnsweredAt = -Infinity;

  /** `run` sends ROLE_PROBE_SQL and returns its one row. */
  constructor(private readonly run: (sql: string) => Promise<ProbeRow[]>) {}

  /** Whether a request found the server gone and no probe has had an answer since. */
  get outage(): boolean {
    return this.#outage;
  }

  get state(): DatabaseState {
    return { role: this.#role, failovers: this.#failovers, unavailable: this.#unavailable };
  }

  observe(observer: RoleObserver): void {
    this.#observers.push(observer);
  }

  /**
   * Reads the role now (one probe at a time; callers at once share it). A probe with no answer
   * within `timeoutMs` counts as unreachable (/readyz, which a balancer checks, allows more
   * than /healthz: a busy pool is not an outage).
   */
  probe(timeoutMs = PROBE_TIMEOUT_MS): Promise<DatabaseRole> {
    this.#probing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const row = await Promise.race([
          this.run(ROLE_PROBE_SQL).then((rows) => rows[0]),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`the database did not answer within ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
        if (!row) throw new Error('the role probe returned no row');
        const readOnly = row.read_only === true || row.read_only === 't';
        if (!readOnly && row.wal_file) this.#sawTimeline(Number.parseInt(row.wal_file.slice(0, 8), 16));
        this.#set(readOnly ? 'read-only' : 'primary');
        this.#probeAnsweredAt = performance.now();
        this.#endOutage();
      } catch (error) {
        if ((error as { code?: unknown }).code === '25006') this.#endOutage();
        else this.#probeFailedAt = performance.now();
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
  noteUnavailable(seen: Exclude<DatabaseRole, 'primary'> | undefined, serverGone = false): void {
    this.#unavailable += 1;
    for (const o of this.#observers) o.unavailable?.();
    if (seen === undefined) return;
    // A probe answered within the last second: the request may have failed before the server
    // came back (a statement sent while it was down), and the server answers now; the role
    // stays what the probe said, and no outage starts.
    const at = performance.now();
    if (at - this.#probeAnsweredAt < PROBE_AFTER_FAILURE_MS) return;
    this.#set(seen);
    // Gone, or out of reach (a pooler's wait for a server timing out) while the last probe,
    // within PROBE_AFTER_FAILURE_MS + PROBE_TIMEOUT_MS, got no answer either.
    const probeFailed = at - this.#probeFailedAt < PROBE_AFTER_FAILURE_MS + PROBE_TIMEOUT_MS;
    if ((serverGone || (seen === 'unreachable' && probeFailed)) && !this.#stopped && !this.#outage) {
      this.#outage = true;
      this.#probeDuringOutage();
      return;
    }
    const now = Date.now();
    if (this.#stopped || now - this.#lastAsked < PROBE_AFTER_FAILURE_MS) return;
    this.#lastAsked = now;
    setTimeout(() => {
      if (!this.#stopped) void this.probe();
    }, PROBE_AFTER_FAILURE_MS).unref();
  }

  /**
   * The database was found not answering at all (src/db/stalled-statements.ts): an outage
   * begins as when a request found the server gone, without counting a request.
   */
  beginOutage(): void {
    this.#probeFailedAt = performance.now();
    this.#set('unreachable');
    if (this.#stopped || this.#outage) return;
    this.#outage = true;
    this.#probeDuringOutage();
  }

  /**
   * During an outage: whether the database answers now, asked of a probe (the one under way,
   * or a new one) that is given at most `waitMs`. A request that asks goes on when it did,
   * so the first request after the server came back is served, not refused until the next
   * timed probe.
   */
  async answersWithin(waitMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const role = await Promise.race([this.probe(), new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs)))]);
    clearTimeout(timer);
    return role !== undefined && role !== 'unreachable';
  }

  /** No more probes after failures (the process stops); no outage holds requests back then. */
  stop(): void {
    this.#stopped = true;
    this.#endOutage();
  }

  #probeDuringOutage(): void {
    clearTimeout(this.#outageTimer);
    this.#outageTimer = setTimeout(() => {
      if (!this.#outage) return;
      void this.probe().then(() => {
        if (this.#outage) this.#probeDuringOutage();
      });
    }, OUTAGE_PROBE_MS);
    this.#outageTimer.unref();
  }

  #endOutage(): void {
    this.#outage = false;
    clearTimeout(this.#outageTimer);
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
