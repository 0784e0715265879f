/**
 * The statements that may still reach every shard of a Citus cluster, each with why: they
 * break the rule that a user table is read with its user named as a parameter
 * (test/helpers/citus-statements.ts, `user-param`) and nothing else excuses them. An entry is
 * a committed snapshot (`write-sql/<name>` or `read-sql/<name>`, under test/procedures/) and
 * a fragment of the statement's text as that snapshot holds it (`?` for each value), white
 * space aside: the snapshot has it one clause a line, the fragment is written on one.
 *
 * test/rules/citus-statements.test.ts fails on an entry that matches no statement breaking
 * that rule: a statement rewritten to route leaves the list with it.
 */
export interface FanOut {
  /** The snapshot, without `.sql`: `read-sql/housekeeping.access-tokens`. */
  snapshot: string;
  /** Text the statement contains. */
  fragment: string;
  /** Why it reaches more than one shard, and what that costs. */
  why: string;
}

export const FAN_OUTS: readonly FanOut[] = [
  {
    snapshot: 'read-sql/users.me-old-form-token',
    fragment: 'from access_tokens t join users u on u.id = t.user_id where t.token_hash = ?',
    why:
      'A token issued before tokens named their user is found by its hash alone: every shard is asked, on each request ' +
      'that carries one. It goes once the last such token has expired (TOKEN_LIFETIME_SECONDS after the change).',
  },
  {
    snapshot: 'read-sql/deliverer.claim-round',
    fragment: 'from webhooks w join users u on u.id = w.user_id where (w.lease_until is null',
    why:
      "The webhook deliverer's round over every user (every 5 s per process, and at each planned retry): it finds the users " +
      'with a due webhook, a safety net for a notification lost or a process gone; each claim then names its user.',
  },
  {
    snapshot: 'read-sql/deliverer.owners',
    fragment: 'select distinct user_id from webhooks',
    why:
      "The users that have webhooks, read when a process starts and with each of the deliverer's rounds over every user " +
      "(every 5 s per process): a write's notification wakes the deliverer only for them.",
  },
  {
    snapshot: 'read-sql/deliverer.release-leases',
    fragment: 'where lease_owner like ?',
    why:
      "A graceful stop gives back every webhook lease of the process, whichever users' they are: once per stop, so that " +
      'other processes take those webhooks at once instead of after the lease expires.',
  },
  {
    snapshot: 'read-sql/deliverer.waiting-events',
    fragment: 'from webhooks w join users u on u.id = w.user_id group by w.state',
    why: 'The metrics of events waiting for webhooks, summed over every user: once per scrape of /metrics, never on a request.',
  },
  {
    snapshot: 'read-sql/stream.lease-renew',
    fragment: 'where user_id = any(?::bigint[]) and id = any(?::uuid[])',
    why:
      "Each process renews the leases of all its open event streams in one statement every 5 s, whichever users' they are: " +
      'it reaches the shards of those users only (pruned by the list of their ids), not every shard.',
  },
  {
    snapshot: 'read-sql/stream.lease-release',
    fragment: 'delete from event_stream_leases where user_id = any(?::bigint[])',
    why: 'Streams closing together give their leases back in one statement: it reaches the shards of their users only.',
  },
  {
    snapshot: 'read-sql/housekeeping.access-tokens',
    fragment: 'delete from access_tokens where expires_at < ?',
    why: "Housekeeping (once a minute per process): deletes every user's expired access tokens.",
  },
  {
    snapshot: 'read-sql/housekeeping.change-log',
    fragment: 'from events where at < ? group by user_id',
    why: 'Housekeeping (once a minute per process): finds the users with events past retention; each user is then pruned under its own lock, naming it.',
  },
  {
    snapshot: 'read-sql/housekeeping.idempotency-keys',
    fragment: 'from idempotency_keys where created_at <= ? group by user_id',
    why: 'Housekeeping (at most once a minute per process, after a keyed write): finds the users with records past 24 hours; each is then pruned naming its user.',
  },
  {
    snapshot: 'read-sql/housekeeping.stream-leases',
    fragment: 'delete from event_stream_leases where expires_at <',
    why: "Housekeeping (once a minute per process): deletes every user's expired event-stream leases (of processes that died).",
  },
  {
    snapshot: 'read-sql/housekeeping.stream-tickets',
    fragment: 'delete from event_stream_tickets where expires_at < ?',
    why: "Housekeeping (once a minute per process): deletes every user's used or expired stream tickets.",
  },
  {
    snapshot: 'read-sql/housekeeping.webhook-deliveries',
    fragment: 'select distinct user_id from webhook_deliveries where at < ?',
    why: 'Housekeeping (once a minute per process): finds the users with webhook attempts past retention; each is then pruned naming its user.',
  },
];
