/**
 * What the owner of webhooks may do with them (API-CONTRACT.md §14), one function per
 * procedure of webhooks.router.ts. Each change is a write of the user (`plainWrite`): under
 * the owner's lock, with Idempotency-Key replays as every write (API-CONTRACT.md §11). A URL is checked as a delivery checks it: its shape, then
 * every address its host resolves to (public only, unless WEBHOOK_ALLOW_PRIVATE_URLS), and kept
 * as its WHATWG serialization.
 */
import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import type { AuthedContext } from '../core/context.js';
import { pageLinks, pageOf } from '../core/envelope.js';
import { linkQuery } from '../core/list-query.js';
import { DomainError } from '../core/errors.js';
import { checkUrlShape, resolveChecked } from './address-guard.js';
import { RETIRED_SECRET_HOURS, newSecret } from './signature.js';
import {
  DELIVERIES_PAGE_SIZE, EVENT_PATTERNS,
  type CreateWebhookInput, type DeliveriesInput, type ReplayWebhookInput, type UpdateWebhookInput,
} from './webhook.schema.js';
import {
  deleteWebhook, findWebhook, insertWebhook, listDeliveries, listWebhooks, presentWebhook, queueTestEvent, replayWebhook,
  rotateSecret, updateWebhook, type DeliveryRow,
} from './webhook.store.js';
import { toSeconds } from '../core/clock.js';
import { plainWrite } from '../writes/user-write.js';

/** The longest a URL's host may take to resolve when it is set. */
const RESOLVE_TIMEOUT_MS = 5_000;

export const WEBHOOKS_PATH = '/api/users/me/webhooks';

async function checkedUrl(ctx: AuthedContext, raw: string): Promise<string> {
  const allowPrivate = ctx.webhooks?.allowPrivateUrls ?? false;
  const shape = checkUrlShape(raw, allowPrivate);
  if ('refused' in shape) throw DomainError.validation('invalid', '/webhook/url', shape.refused);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ refused: string }>((resolve) => {
    timer = setTimeout(() => resolve({ refused: 'The URL\'s host could not be resolved in time.' }), RESOLVE_TIMEOUT_MS);
  });
  try {
    const resolved = await Promise.race([resolveChecked(shape.url, { allowPrivate, resolve: ctx.webhooks?.resolve }), timeout]);
    if ('refused' in resolved) throw DomainError.validation('invalid', '/webhook/url', resolved.refused);
  } finally {
    clearTimeout(timer);
  }
  // Kept as its WHATWG serialization, the URL whose host was just checked (API-CONTRACT.md §14):
  // what is stored, answered and delivered to is what the service read, in the form every parser
  // reads alike. Every attempt parses and checks it again.
  return shape.url.href;
}

/** Patterns once each, in the order of EVENT_PATTERNS. */
function patterns(events: readonly string[]): string[] {
  return EVENT_PATTERNS.filter((p) => events.includes(p));
}

export async function createWebhook(ctx: AuthedContext, input: z.infer<typeof CreateWebhookInput>) {
  const { webhook } = input;
  const url = await checkedUrl(ctx, webhook.url);
  const created = await plainWrite(ctx, async (em) => {
    const secret = newSecret();
    const row = await insertWebhook(em, ctx.user.id, {
      url,
      events: patterns(webhook.events ?? ['*']),
      description: webhook.description ?? '',
      secret,
      now: ctx.clock.now(),
    });
    return { data: presentWebhook(row), meta: { secret } };
  });
  // This process's deliverer now looks at the user's writes (src/webhooks/deliverer.ts `#owners`).
  ctx.webhooks?.wake?.(ctx.user.id);
  return created;
}

export async function listUserWebhooks(ctx: AuthedContext) {
  return { data: (await listWebhooks(ctx.em, ctx.user.id)).map(presentWebhook) };
}

export async function getWebhook(ctx: AuthedContext, id: number) {
  return { data: presentWebhook(await findWebhook(ctx.em, ctx.user.id, id)) };
}

export async function editWebhook(ctx: AuthedContext, input: z.infer<typeof UpdateWebhookInput>) {
  const { webhook } = input;
  // Another user's (or no) webhook is 404 before its URL is looked at (API-CONTRACT.md §14).
  if (webhook.url !== undefined) await findWebhook(ctx.em, ctx.user.id, input.id);
  const url = webhook.url === undefined ? undefined : await checkedUrl(ctx, webhook.url);
  const edit = { url, events: webhook.events && patterns(webhook.events), description: webhook.description, state: webhook.state };
  const answer = await plainWrite(ctx, async (em) => ({ data: presentWebhook(await updateWebhook(em, ctx.user.id, input.id, edit, ctx.clock.now())) }));
  if (webhook.state === 'enabled' || webhook.url !== undefined) ctx.webhooks?.wake?.(ctx.user.id);
  return answer;
}

export async function removeWebhook(ctx: AuthedContext, id: number): Promise<void> {
  await plainWrite(ctx, (em) => deleteWebhook(em, ctx.user.id, id));
}

export async function replay(ctx: AuthedContext, input: z.infer<typeof ReplayWebhookInput>) {
  const answer = await plainWrite(ctx, async (em) => ({
    data: presentWebhook(await replayWebhook(em, ctx.user.id, input.id, BigInt(input.replay.after), ctx.clock.now())),
  }));
  ctx.webhooks?.wake?.(ctx.user.id);
  return answer;
}

export async function sendTestEvent(ctx: AuthedContext, id: number) {
  const answer = await plainWrite(ctx, async (em) => ({
    data: presentWebhook(await queueTestEvent(em, ctx.user.id, id, `msg_${randomBytes(12).toString('base64url')}`, ctx.clock.now())),
  }));
  ctx.webhooks?.wake?.(ctx.user.id);
  return answer;
}

export async function newWebhookSecret(ctx: AuthedContext, id: number) {
  return plainWrite(ctx, async (em) => {
    const now = ctx.clock.now();
    const secret = newSecret();
    const row = await rotateSecret(em, ctx.user.id, id, secret, now, new Date(now.getTime() + RETIRED_SECRET_HOURS * 3_600_000));
    return { data: presentWebhook(row), meta: { secret } };
  }).finally(() => ctx.webhooks?.wake?.(ctx.user.id));
}

function presentDelivery(row: DeliveryRow) {
  return {
    type: 'delivery' as const,
    id: Number(row.id),
    attributes: {
      eventId: row.event_id,
      eventType: row.event_type,
      attempt: row.attempt,
      at: toSeconds(new Date(row.at)),
      outcome: row.outcome,
      httpStatus: row.http_status,
      error: row.error,
      durationMs: row.duration_ms,
      nextAttemptAt: row.next_attempt_at === null ? 0 : toSeconds(new Date(row.next_attempt_at)),
    },
  };
}

export async function deliveries(ctx: AuthedContext, input: z.infer<typeof DeliveriesInput>) {
  const page = pageOf(input.page, DELIVERIES_PAGE_SIZE);
  const { rows, total } = await listDeliveries(ctx.em, ctx.user.id, input.id, page.offset, page.size);
  return {
    data: rows.map(presentDelivery),
    links: pageLinks(ctx.baseUrl, `/api/webhooks/${input.id}/deliveries`, page.page, page.size, total, await linkQuery(ctx, input, [])),
  };
}
