/**
 * Webhook delivery in one server process (API-CONTRACT.md §14), a consumer of the change log
 * started by the server beside the event hub and never called by a write.
 *
 * - Woken at once by the change log's notifications (the event hub's LISTEN connection) of
 *   users it knows to have webhooks (`#owners`), it takes the due webhooks of the users named
 *   (delivery.store.ts `claimDue`: a lease, one statement); a round over every user runs
 *   every `pollMs` (5 s), and at the time of each retry this process planned, as a safety net
 *   for a notification lost or a process gone.
 * - A leased webhook's events go out one at a time in id order, each a POST signed as
 *   Standard Webhooks says with the event id as `webhook-id`; each attempt is recorded with
 *   the move of the webhook's place in one statement, so a crash between the POST and that
 *   statement means the event is attempted again (same `webhook-id`) once the lease expires
 *   (twice the timeout and 10 s), or, when the database cut the loop off (a failover), as soon
 *   as it answers again (`#giveBack`). At least once, in order, per webhook.
 * - A failure waits the next step of the retry schedule (±10 % jitter; a Retry-After of a 429
 *   or 503 up to an hour when longer), with later events behind it; a 410 or an exhausted
 *   schedule disables the webhook, logged once with why.
 * - At most `concurrency` webhooks are attempted at once by a process.
 */
import { randomUUID } from 'node:crypto';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { WebhookConfig } from '../config.js';
import type { Logger } from '../core/logger.js';
import { isConnectionUnfit, isDatabaseUnavailable } from '../core/failures.js';
import type { Resolve } from './address-guard.js';
import { claimDue, markSending, webhookOwners, recordStep, releaseLease, releaseLeases, type Attempt, type ClaimedWebhook, type Recorded, type Step } from './delivery.store.js';
import { postOnce, type OutboundResult } from './outbound.js';
import { matchesPatterns } from './webhook.schema.js';
import { signedHeaders, stillSigning } from './signature.js';
import { retiredSecretsOf } from './webhook.store.js';

/** What the deliverer tells the metrics (src/metrics/service-metrics.ts). */
export interface DeliveryObserver {
  attempted(outcome: Attempt['outcome'], durationMs: number): void;
  /** Seconds from an event's commit to its first attempt. */
  firstAttempt(seconds: number): void;
}

/** A write's notification: its user and the ids of its events; null when some may have been missed. */
export type Heard = { userId: number; first: bigint; last: bigint } | null;

/** What hears the change log's notifications (src/changes/event-hub.ts `watch`). */
export interface ChangeNotifications {
  watch(listener: (heard: Heard) => void): Promise<() => void>;
}

export interface DelivererOptions {
  /** A fresh entity manager per statement. */
  em: () => SqlEntityManager;
  notifications: ChangeNotifications;
  config: WebhookConfig;
  log: Logger;
  /** How host names are resolved (tests pass their own); the system's by default. */
  resolve?: Resolve;
  observer?: DeliveryObserver;
  /** Milliseconds between rounds over every user; 5 s. */
  pollMs?: number;
  /** Webhooks this process attempts at once; 16. */
  concurrency?: number;
  /** The process's clock (leases, retries); Date.now by default. */
  now?: () => number;
}

/** The longest a Retry-After is honoured: an hour. */
const MAX_RETRY_AFTER_SECONDS = 3600;
/** What a webhook's mark of a request under way lasts beyond the request's time limit (`markSending`). */
const SENDING_MARGIN_MS = 5_000;
/** Retries planned further than this are left to the rounds over every user. */
const MAX_TIMER_MS = 60 * 60 * 1000;
/** How often a lease the database cut off is offered back while the database does not answer. */
const GIVE_BACK_EVERY_MS = 500;

export class WebhookDeliverer {
  readonly owner = randomUUID();
  readonly #options: DelivererOptions;
  readonly #now: () => number;
  readonly #pollMs: number;
  readonly #concurrency: number;
  readonly #leaseMs: number;
  /** Webhooks under way in this process, by `user:id`; `true` when their user was notified meanwhile. */
  readonly #running = new Map<string, boolean>();
  /** Users to look at in the next round; `null` in it means every user. */
  #wanted = new Set<number | null>();
  #round: Promise<void> | undefined;
  #scheduled = false;
  #poll: NodeJS.Timeout | undefined;
  readonly #timers = new Set<NodeJS.Timeout>();
  #unwatch: (() => void) | undefined;
  #stopped = false;
  readonly #aborts = new AbortController();
  readonly #loops = new Set<Promise<void>>();
  #claims = 0;
  /**
   * When this process heard of each user's recent writes (their events' ids), for the time from
   * commit to first attempt: a notification follows the commit within milliseconds (the
   * announcer sends it after the write's answer, src/writes/announcer.ts), where an event's `at`
   * is a whole second. Each is timed once, by its first attempt here.
   */
  readonly #heard = new Map<number, Array<{ first: bigint; last: bigint; at: number }>>();
  /**
   * The users this process knows to have webhooks: a write's notification wakes the deliverer
   * only for them, for most writes are of users with none, and looking for a user's due
   * webhooks is a statement. Read by every round over every user, the first at start (a start
   * does not wait for it; until a read succeeds, every notification wakes); a webhook made or
   * changed here adds its user at once (`wake`): one made by another process is known here from
   * the next round (5 s), and until then its events are attempted by the process that made it,
   * or by that round. A user whose webhooks are all deleted leaves at the next round's read
   * (one woken while that read ran stays: its webhook may be newer than the read); a
   * notification never adds its user.
   */
  readonly #owners = new Set<number>();
  /** The users `wake` named while the users with webhooks were being read. */
  #wokenDuringRead: Set<number> | undefined;
  #ownersKnown = false;

  constructor(options: DelivererOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#pollMs = options.pollMs ?? 5_000;
    this.#concurrency = options.concurrency ?? 16;
    this.#leaseMs = 2 * options.config.timeoutMs + 10_000;
  }

  /** Starts listening; the round over every user it starts with reads the users with webhooks (`#owners`). */
  async start(): Promise<void> {
    this.#unwatch = await this.#options.notifications.watch((heard) => {
      if (heard && this.#ownersKnown && !this.#owners.has(heard.userId)) return;
      if (heard) this.#noteHeard(heard);
      this.#wake(heard?.userId ?? null);
    });
    this.#poll = setInterval(() => this.wake(null), this.#pollMs);
    this.#poll.unref();
    this.wake(null);
  }

  /** Looks for due webhooks of `userId` (null: of every user) soon; the user is one with webhooks (`#owners`). */
  wake(userId: number | null): void {
    if (userId !== null) {
      this.#owners.add(userId);
      this.#wokenDuringRead?.add(userId);
    }
    this.#wake(userId);
  }

  #wake(userId: number | null): void {
    if (this.#stopped) return;
    if (userId !== null) {
      // A webhook of this user under way here may have been passed over by that look: it looks again when done.
      for (const key of this.#running.keys()) if (key.startsWith(`${userId}:`)) this.#running.set(key, true);
    }
    this.#wanted.add(userId);
    this.#schedule();
  }

  /** Reads the users with webhooks into `#owners`; a failure leaves them as they were (unknown before the first read). */
  async #loadOwners(): Promise<void> {
    const woken = new Set<number>();
    this.#wokenDuringRead = woken;
    try {
      const read = new Set(await webhookOwners(this.#options.em()));
      for (const user of this.#owners) if (!read.has(user) && !woken.has(user)) this.#owners.delete(user);
      for (const user of read) this.#owners.add(user);
      this.#ownersKnown = true;
    } catch (error) {
      this.#logFailure(error, 'the users with webhooks could not be read; every write wakes the deliverer until they are');
    } finally {
      this.#wokenDuringRead = undefined;
    }
  }

  /** One round at a time; what is asked for meanwhile waits for the next, which follows at once. */
  #schedule(): void {
    if (this.#scheduled || this.#round) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#stopped || this.#wanted.size === 0) return;
      const wanted = this.#wanted;
      this.#wanted = new Set();
      this.#round = this.#claim(wanted.has(null) ? null : ([...wanted] as number[])).finally(() => {
        this.#round = undefined;
        if (this.#wanted.size > 0) this.#schedule();
      });
    });
  }

  /**
   * Claims nothing more, lets the attempts under way end (at most a few seconds, then cuts them
   * off: an attempt cut off is not recorded, and is made again elsewhere), and gives back the
   * leases this process holds, so other processes take its webhooks at once.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#unwatch?.();
    clearInterval(this.#poll);
    for (const timer of this.#timers) clearTimeout(timer);
    const running = Promise.allSettled([...this.#loops, this.#round]);
    const grace = Math.min(this.#options.config.timeoutMs, 5_000);
    const ended = await Promise.race([running.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), grace).unref())]);
    if (!ended) {
      this.#aborts.abort();
      await Promise.race([running, new Promise((r) => setTimeout(r, 2_000).unref())]);
    }
    await releaseLeases(this.#options.em(), this.owner).catch(() => undefined);
  }

  async #claim(users: number[] | null): Promise<void> {
    const free = this.#concurrency - this.#running.size;
    if (free <= 0 || this.#stopped) {
      if (!this.#stopped) this.#retryLater(users, 100);
      return;
    }
    let claimed: ClaimedWebhook[];
    const now = this.#now();
    try {
      // Each claim leases under a name of its own: should this process claim a webhook again
      // (its loop stalled past the lease), the stalled loop's records no longer hold.
      const claim = `${this.owner}:${++this.#claims}`;
      if (users === null) await this.#loadOwners();
      claimed = await claimDue(this.#options.em(), claim, new Date(now), new Date(now + this.#leaseMs), free, users);
    } catch (error) {
      this.#logFailure(error, 'webhook deliveries could not be looked up this round');
      this.#retryLater(users, 1_000);
      return;
    }
    for (const webhook of claimed) {
      this.#owners.add(webhook.user_id);
      const key = `${webhook.user_id}:${webhook.id}`;
      this.#running.set(key, false);
      const loop = this.#deliver(webhook)
        .catch((error: unknown) => {
          // The connection gone, or leading to a server that is read-only now (a failover); not a
          // statement timeout, a full disk or too many clients, which may repeat at once.
          if (!isConnectionUnfit(error)) return this.#logFailure(error, 'webhook delivery stopped; its lease expires and it is attempted again');
          this.#logFailure(error, 'webhook delivery stopped; its lease goes back once the database answers');
          this.#giveBack(webhook);
        })
        .finally(() => {
          const notified = this.#running.get(key);
          this.#running.delete(key);
          this.#loops.delete(loop);
          if (notified) this.wake(webhook.user_id);
        });
      this.#loops.add(loop);
    }
    // The process had no room for every due webhook: the next round takes more.
    if (claimed.length === free) this.#retryLater(users, 50);
  }

  /**
   * A loop the database cut off (its connection lost, or the server read-only: a failover, an
   * outage): the claim's lease is given back as soon as the database takes a statement again,
   * so the webhook goes on within a second of its return rather than when the lease ends. The lease is this claim's alone (the release
   * names it), so nothing another process holds is touched; an attempt whose outcome was not
   * recorded is made again with the same `webhook-id`. Any other error (a statement timeout
   * under load too) keeps the lease to its end, so a delivery that fails the same way every
   * time is not retried in a tight loop.
   */
  #giveBack(webhook: ClaimedWebhook): void {
    const until = this.#now() + this.#leaseMs;
    const attempt = () => {
      if (this.#stopped || this.#now() >= until) return;
      releaseLease(this.#options.em(), webhook.user_id, webhook.id, webhook.lease_owner).then(
        () => this.wake(webhook.user_id),
        () => this.#after(GIVE_BACK_EVERY_MS, attempt),
      );
    };
    this.#after(GIVE_BACK_EVERY_MS, attempt);
  }

  #retryLater(users: number[] | null, ms: number): void {
    this.#after(ms, () => {
      if (users === null) this.wake(null);
      else for (const user of users) this.wake(user);
    });
  }

  #after(ms: number, run: () => void): void {
    if (this.#stopped || ms > MAX_TIMER_MS) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      run();
    }, Math.max(0, ms));
    timer.unref();
    this.#timers.add(timer);
  }

  /** Attempts a leased webhook's test event, then its events in order, until none is left, one fails, or the lease is lost. */
  async #deliver(webhook: ClaimedWebhook): Promise<void> {
    const base = { userId: webhook.user_id, id: webhook.id, owner: webhook.lease_owner, generation: webhook.generation };
    const lease = () => new Date(this.#now() + this.#leaseMs);

    for (const test of webhook.test_events) {
      if (this.#stopped) return;
      const body = JSON.stringify({ id: test.id, type: 'webhook.test', data: { type: 'webhook', id: webhook.id }, at: test.at });
      const attempt = await this.#attempt(webhook, test.id, 'webhook.test', body, 1);
      if (!attempt || this.#cutOff(attempt)) return;
      // A test is attempted once, whatever its outcome: it shows the receiver works, and plans nothing.
      const { retryAfterSeconds: _unused, ...logged } = attempt;
      const recorded = await this.#record({ ...base, attempt: { ...logged, nextAttemptAt: null }, testId: test.id, leaseUntil: lease() });
      if (!recorded.held) return this.#lost(webhook, recorded);
    }
    if (webhook.log_due && BigInt(webhook.cursor) < BigInt(webhook.pruned)) {
      // Retention removed events it has not delivered (a retry waited past EVENTS_RETENTION_DAYS):
      // it stops rather than skip them; enabling it answers 410 cursor_expired, a replay resumes it.
      const reason = `Events after ${webhook.cursor}, not yet delivered, are no longer kept (EVENTS_RETENTION_DAYS): replay from a kept event id, then enable the webhook.`;
      const recorded = await this.#record({ ...base, disable: reason, leaseUntil: null });
      if (recorded.held) this.#options.log.warn({ webhook: webhook.id, user: webhook.user_id, reason }, 'webhook disabled');
      return;
    }
    if (!webhook.log_due) {
      const recorded = await this.#record({ ...base, leaseUntil: null });
      if (recorded.held && recorded.more && recorded.enabled) this.#again(webhook);
      return;
    }

    let attempts = webhook.attempt;
    let pending = webhook.pending;
    for (;;) {
      if (this.#stopped) return; // the lease goes back with the others (stop)
      const next = pending.find((e) => matchesPatterns(webhook.events, e.type));
      if (!next) {
        // Nothing of the events in hand matches: the place moves past them, the lease goes back.
        const last = pending.at(-1)?.id;
        const recorded = await this.#record({ ...base, ...(last === undefined ? {} : { cursor: last }), leaseUntil: null });
        if (!recorded.held) return this.#lost(webhook, recorded);
        // With events read, more may follow them; with none read, a write committed since the
        // claim wakes it by its own notification (never a loop of empty claims).
        if (last !== undefined && recorded.more && recorded.enabled) this.#again(webhook);
        return;
      }
      const body = JSON.stringify({ id: next.id, type: next.type, data: next.data, at: Math.floor(next.at) });
      const heardAt = this.#takeHeard(webhook.user_id, BigInt(next.id));
      if (heardAt !== undefined) this.#options.observer?.firstAttempt(Math.max(0, this.#now() - heardAt) / 1000);
      const attempt = await this.#attempt(webhook, next.id, next.type, body, attempts + 1);
      if (!attempt || this.#cutOff(attempt)) return;
      if (attempt.outcome === 'delivered') {
        const rest = pending.slice(pending.indexOf(next) + 1);
        const { retryAfterSeconds: _unused, ...logged } = attempt;
        const recorded = await this.#record({ ...base, attempt: logged, cursor: next.id, leaseUntil: rest.length > 0 ? lease() : null });
        if (!recorded.held) return this.#lost(webhook, recorded);
        if (rest.length > 0) {
          pending = rest;
          attempts = 0;
          continue;
        }
        // Events after those in hand: a claim of its own reads them (the lease went back with the record).
        if (recorded.more && recorded.enabled) this.#again(webhook);
        return;
      }
      // Failed or blocked: the event waits, and every later one behind it.
      const failures = attempts + 1;
      const schedule = this.#options.config.retrySchedule;
      let disable: string | undefined;
      let nextAttemptAt: Date | null = null;
      if (attempt.outcome === 'failed' && attempt.httpStatus === 410) {
        disable = 'The URL answered 410 Gone.';
      } else if (failures > schedule.length) {
        disable = `${failures} attempts in a row failed (the last: ${attempt.error ?? 'no answer'}); the retry schedule is exhausted.`;
      } else {
        let waitMs = schedule[failures - 1]! * 1000 * (0.9 + 0.2 * Math.random());
        const retryAfter = attempt.retryAfterSeconds;
        if (retryAfter != null && (attempt.httpStatus === 429 || attempt.httpStatus === 503)) {
          waitMs = Math.max(waitMs, Math.min(retryAfter, MAX_RETRY_AFTER_SECONDS) * 1000);
        }
        nextAttemptAt = new Date(this.#now() + waitMs);
      }
      const { retryAfterSeconds: _ignored, ...logged } = attempt;
      const recorded = await this.#record({
        ...base,
        attempt: { ...logged, nextAttemptAt },
        failed: { attempts: failures, nextAttemptAt: nextAttemptAt ?? new Date(this.#now()) },
        disable,
        leaseUntil: null,
      });
      if (!recorded.held) return this.#lost(webhook, recorded);
      if (disable) {
        this.#options.log.warn({ webhook: webhook.id, user: webhook.user_id, event: next.id, reason: disable }, 'webhook disabled');
      } else if (nextAttemptAt) {
        this.#after(nextAttemptAt.getTime() - this.#now() + 10, () => this.wake(webhook.user_id));
      }
      return;
    }
  }

  /** The attempt was cut off by this process's stop: it is not recorded, and is made again elsewhere. */
  #cutOff(attempt: Attempt): boolean {
    return this.#stopped && attempt.outcome === 'failed' && attempt.error === 'aborted';
  }

  /** The webhook has more to deliver once its loop ends: a new claim takes it (here or elsewhere). */
  #again(webhook: ClaimedWebhook): void {
    this.#running.set(`${webhook.user_id}:${webhook.id}`, true);
  }

  /**
   * A step was not recorded: the webhook is gone, or its lease is another process's (this one
   * stalled past it), or its owner changed it since the claim. In the last case the lease came
   * back with the step, and the webhook is claimed again at once as it now stands.
   */
  #lost(webhook: ClaimedWebhook, recorded: Recorded): void {
    if (recorded.moved) this.#again(webhook);
  }

  #noteHeard(heard: NonNullable<Heard>): void {
    const now = this.#now();
    const list = this.#heard.get(heard.userId) ?? [];
    // Moved to the end: the map's order is that of the users last heard of.
    this.#heard.delete(heard.userId);
    this.#heard.set(heard.userId, list);
    list.push({ first: heard.first, last: heard.last, at: now });
    // Bounded: what is not attempted within a minute, or past the last 100 writes of a user, or
    // of the last 10,000 users heard of, is not timed.
    while (list.length > 100 || (list[0] && now - list[0].at > 60_000)) list.shift();
    if (this.#heard.size > 10_000) this.#heard.delete(this.#heard.keys().next().value!);
  }

  /** When this process heard of the user's event `id`, once: undefined when it did not, or has timed it already. */
  #takeHeard(userId: number, id: bigint): number | undefined {
    const list = this.#heard.get(userId);
    const entry = list?.find((e) => e.first <= id && id <= e.last);
    if (!entry) return undefined;
    if (entry.first === entry.last) list!.splice(list!.indexOf(entry), 1);
    else if (id === entry.first) entry.first = id + 1n;
    else if (id === entry.last) entry.last = id - 1n;
    else {
      // An event in the middle of a write's events: the range is split around it.
      list!.splice(list!.indexOf(entry), 1, { first: entry.first, last: id - 1n, at: entry.at }, { first: id + 1n, last: entry.last, at: entry.at });
    }
    if (list!.length === 0) this.#heard.delete(userId);
    return entry.at;
  }

  /**
   * One request, or null when it is not sent: the webhook, or its user, is gone (a deletion of
   * the account: src/users/delete-user.ts), or its lease is another claim's. Before it is
   * sent, the webhook is marked as sending until the request's time limit is over, plus
   * SENDING_MARGIN_MS (`markSending`); the record of the attempt clears the mark. A mark that
   * took longer than the margin to make is not relied on: the request is not sent, and the
   * event is attempted again once the lease expires.
   */
  async #attempt(
    webhook: ClaimedWebhook, eventId: string, eventType: string, body: string, number: number,
  ): Promise<(Attempt & { retryAfterSeconds: number | null }) | null> {
    const marking = performance.now();
    const until = new Date(this.#now() + this.#options.config.timeoutMs + SENDING_MARGIN_MS);
    const marked = await markSending(this.#options.em(), webhook.user_id, webhook.id, webhook.lease_owner, until);
    if (!marked || performance.now() - marking > SENDING_MARGIN_MS) return null;
    const at = new Date(this.#now());
    // The current secret and, newest first, those retired that still sign now: a retired secret
    // stops at its time, also in the middle of a lease; a rotation signs from the next request.
    const secrets = [marked.secret, ...stillSigning(retiredSecretsOf(marked), at).map((r) => r.secret).reverse()];
    const headers = signedHeaders(eventId, Math.floor(at.getTime() / 1000), body, secrets);
    const result: OutboundResult = await postOnce(webhook.url, headers, body, {
      timeoutMs: this.#options.config.timeoutMs,
      allowPrivate: this.#options.config.allowPrivateUrls,
      resolve: this.#options.resolve,
      signal: this.#aborts.signal,
    });
    this.#options.observer?.attempted(result.outcome, result.durationMs);
    if (result.outcome === 'blocked') {
      this.#options.log.warn({ webhook: webhook.id, user: webhook.user_id, event: eventId, reason: result.error }, 'webhook delivery blocked');
    }
    return {
      eventId, eventType, attempt: number, at,
      outcome: result.outcome, httpStatus: result.httpStatus, error: result.error,
      durationMs: Math.round(result.durationMs), nextAttemptAt: null, retryAfterSeconds: result.retryAfterSeconds,
    };
  }

  async #record(step: Omit<Step, 'now'>): Promise<Recorded> {
    try {
      return await recordStep(this.#options.em(), { ...step, now: new Date(this.#now()) });
    } catch (error) {
      // The webhook was deleted meanwhile: its attempts go with it.
      if ((error as { code?: string }).code === '23503') return { held: false, moved: false, more: false, enabled: false };
      throw error;
    }
  }

  #logFailure(error: unknown, message: string): void {
    if (isDatabaseUnavailable(error)) this.#options.log.debug({ err: error }, message);
    else this.#options.log.warn({ err: error }, message);
  }
}
