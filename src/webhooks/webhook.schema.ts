/** Wire shapes of webhooks and their deliveries (API-CONTRACT.md §14). */
import { z } from 'zod';
import { PageLinks } from '../core/envelope.js';
import { EVENT_ID } from '../core/errors.js';
import { inputObject, pageParam, pathId, text } from '../core/fields.js';
import { MAX_URL_LENGTH, checkUrlShape } from './address-guard.js';

/** Webhooks a user may have. */
export const MAX_WEBHOOKS_PER_USER = 10;
/** Attempts per page of `deliveries`. */
export const DELIVERIES_PAGE_SIZE = 50;

/** The change log's event types (API-CONTRACT.md §10). */
export const EVENT_TYPES = ['project.created', 'project.updated', 'project.deleted', 'task.created', 'task.updated'] as const;
/** What a webhook's `events` may name: an event type, every event of a resource, or every event. */
export const EVENT_PATTERNS = ['*', 'project.*', 'task.*', ...EVENT_TYPES] as const;
export type EventPattern = (typeof EVENT_PATTERNS)[number];

/** Whether an event of `type` goes to a webhook listening to `patterns`. */
export function matchesPatterns(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))));
}

// Over 2,048 characters is `invalid`, as every other fault of the URL (API-CONTRACT.md §14).
const urlText = text({ min: 1, max: MAX_URL_LENGTH, tooLong: 'invalid', what: 'URL' });
// No `format: uri`: the URL is read as WHATWG URL parsers (Node's, browsers') read it, which take
// text RFC 3986 refuses (a space, `é`), and it is kept as their serialization (manage-webhooks.ts).
/**
 * Its form is checked with the rest of the body, so that its faults are reported beside the
 * others (API-CONTRACT.md §2): an absolute http(s) URL without user info. Whether it must be
 * `https:` and reach public addresses depends on WEBHOOK_ALLOW_PRIVATE_URLS and on DNS: the
 * procedure checks that once the body is read (manage-webhooks.ts).
 */
const urlForm = urlText.superRefine((value, ctx) => {
  if ([...value].length > MAX_URL_LENGTH || value.includes('\u0000') || !value.isWellFormed()) return; // said already
  const shape = checkUrlShape(value, true);
  if ('refused' in shape) ctx.addIssue({ code: 'custom', message: shape.refused, params: { code: 'invalid' } });
});
const url = urlForm.meta({
  // What every text says (its length, no NUL, no unpaired surrogate), then what a webhook URL adds.
  description: `${z.globalRegistry.get(urlText)?.description} An absolute \`https:\` URL written \`https://host…\` (two slashes before its host), without user info and without a backslash, as WHATWG URL parsers read it, and kept as their serialization (the \`url\` answered: scheme and host in lower case, a default port dropped, tabs and newlines removed, dot segments resolved, what a URL may not hold as is percent-encoded, an international host name in punycode); its host must resolve to public addresses only (not loopback, private, link-local, CGNAT, multicast, unspecified, IPv6 unique-local or IPv4-mapped). Otherwise 422 \`invalid\`. Checked again at every attempt.`,
  example: 'https://hooks.example.com/planning',
});
const events = z
  .array(z.enum(EVENT_PATTERNS))
  .min(1)
  .max(64)
  .meta({ description: 'The events to deliver: event types, `project.*`, `task.*` or `*` (every event).', example: ['task.*'] });
const description = text({ max: 1_000, what: 'Description' });
const state = z.enum(['enabled', 'disabled']);

export const CreateWebhookInput = inputObject({
  webhook: z.object({ url, events: events.optional(), description: description.optional() }),
});

export const WebhookIdInput = inputObject({ id: pathId });

export const UpdateWebhookInput = inputObject({
  id: pathId,
  webhook: z.object({ url: url.optional(), events: events.optional(), description: description.optional(), state: state.optional() }),
});

export const ReplayWebhookInput = inputObject({
  id: pathId,
  replay: z.object({
    after: z.string().regex(EVENT_ID, 'An event id: decimal digits.').meta({ description: 'Every kept event after this id is delivered again.', example: '120' }),
  }),
});

export const DeliveriesInput = z.object({ id: pathId, page: pageParam });

export const WebhookResource = z
  .object({
    type: z.literal('webhook'),
    id: z.int(),
    attributes: z.object({
      url: z.string(),
      events: z.array(z.enum(EVENT_PATTERNS)),
      description: z.string(),
      state,
      disabledReason: z.string().nullable().meta({ description: 'Why delivery stopped, when the service disabled the webhook; null otherwise.' }),
      createdAt: z.int().meta({ description: 'Unix seconds.' }),
      lastEventId: z.string().meta({ description: 'The newest event of your change log this webhook is done with (delivered, or not matching its events); the next delivery is of a later one.' }),
    }),
  })
  .meta({ id: 'Webhook' });
export type WebhookResource = z.infer<typeof WebhookResource>;

export const WebhookDocument = z.object({ data: WebhookResource });
export const WebhookWithSecretDocument = z.object({
  data: WebhookResource,
  meta: z.object({
    secret: z.string().meta({ description: 'The signing secret, `whsec_` and the base64 of 32 random bytes. Shown this once.' }),
  }),
});
export const WebhookListDocument = z.object({ data: z.array(WebhookResource) });

export const DeliveryResource = z
  .object({
    type: z.literal('delivery'),
    id: z.int(),
    attributes: z.object({
      eventId: z.string(),
      eventType: z.string().meta({ description: 'An event type of the change log, or `webhook.test` for a test event.' }),
      attempt: z.int().meta({ description: 'This attempt of the event: 1 for the first.' }),
      at: z.int().meta({ description: 'Unix seconds when the attempt started.' }),
      outcome: z.enum(['delivered', 'failed', 'blocked']).meta({
        description: '`delivered`: a 2xx in time. `failed`: another status, a redirect (never followed), a network error or the time limit. `blocked`: the URL was refused at this attempt (its host did not resolve, or resolved to an address that is not public), so nothing was sent.',
      }),
      httpStatus: z.int().nullable().meta({ description: 'The status the URL answered; null when none came.' }),
      error: z.string().nullable().meta({ description: 'Why the attempt failed or was blocked; null when delivered.' }),
      durationMs: z.int(),
      nextAttemptAt: z.int().meta({ description: 'Unix seconds of the next attempt of a failed event; 0 when none is planned (an unset timestamp).' }),
    }),
  })
  .meta({ id: 'Delivery' });

export const DeliveryPage = z.object({ data: z.array(DeliveryResource), links: PageLinks });
