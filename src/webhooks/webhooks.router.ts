/**
 * Webhooks (API-CONTRACT.md §14): a table of procedures, each served by manage-webhooks.ts;
 * delivery itself runs beside the server (deliverer.ts), never in a request.
 */
import { z } from 'zod';
import { noInput } from '../core/fields.js';
import { authedProcedure, routesUnder } from '../core/procedures.js';
import { router } from '../core/trpc.js';
import {
  WEBHOOKS_PATH, createWebhook, deliveries, editWebhook, getWebhook, listUserWebhooks, newWebhookSecret, removeWebhook, replay,
  sendTestEvent,
} from './manage-webhooks.js';
import { RETIRED_SECRET_HOURS } from './signature.js';
import { MAX_RETIRED_SECRETS } from './webhook.store.js';
import {
  CreateWebhookInput, DELIVERIES_PAGE_SIZE, DeliveriesInput, DeliveryPage, MAX_WEBHOOKS_PER_USER, ReplayWebhookInput, UpdateWebhookInput,
  WebhookDocument, WebhookIdInput, WebhookListDocument, WebhookWithSecretDocument,
} from './webhook.schema.js';

const route = routesUnder('webhooks', authedProcedure);
const ONE = '/api/webhooks/{id}';

export const webhooksRouter = router({
  create: route({
    method: 'POST', path: WEBHOOKS_PATH,
    summary: 'Create a webhook',
    description: [
      'Pushes your change log (the events of GET /api/users/me/events) to `url`, in order, at least once, each event a `POST` signed as the Standard Webhooks specification says: headers `webhook-id` (the event id, the same on every retry and replay), `webhook-timestamp` and `webhook-signature`.',
      '`events` (default `["*"]`): event types, `project.*`, `task.*` or `*`. Delivery starts after the newest event of the log. `meta.secret` is the signing secret, shown this once.',
      `At most ${MAX_WEBHOOKS_PER_USER} webhooks per user (422 \`limit_reached\`). The URL must be \`https:\`, without user info, and its host must resolve to public addresses only (422 \`invalid\` on \`/webhook/url\`).`,
    ].join('\n\n'),
  }, { successStatus: 201, errorCodes: ['parameter_missing', 'invalid', 'too_long', 'limit_reached'] })
    .input(CreateWebhookInput)
    .output(WebhookWithSecretDocument)
    .mutation(({ ctx, input }) => createWebhook(ctx, input)),

  list: route({ method: 'GET', path: WEBHOOKS_PATH, summary: 'Your webhooks', description: 'Every webhook of yours, oldest first.' })
    .input(noInput)
    .output(WebhookListDocument)
    .query(({ ctx }) => listUserWebhooks(ctx)),

  get: route({
    method: 'GET', path: ONE,
    summary: 'A webhook',
    description: 'One of your webhooks: where it delivers, which events, whether it is enabled (and why not), and the newest event of your change log it is done with. An id that is unknown, malformed or another user\'s is 404 `record_not_found`.',
  }, { resource: 'webhook' })
    .input(WebhookIdInput)
    .output(WebhookDocument)
    .query(({ ctx, input }) => getWebhook(ctx, input.id)),

  update: route({
    method: 'PATCH', path: ONE,
    summary: 'Change a webhook, or enable or disable it',
    description: 'Any of `url`, `events`, `description` and `state`. Enabling a disabled webhook resumes delivery from the first event it has not delivered; when that event is no longer kept (EVENTS_RETENTION_DAYS) it is 410 `cursor_expired` with `meta.last_event_id`: replay from a kept id, then enable.',
  }, { resource: 'webhook', errorCodes: ['parameter_missing', 'invalid', 'too_long', 'cursor_expired'] })
    .input(UpdateWebhookInput)
    .output(WebhookDocument)
    .mutation(({ ctx, input }) => editWebhook(ctx, input)),

  delete: route({ method: 'DELETE', path: ONE, summary: 'Delete a webhook', description: 'Stops its deliveries and forgets its attempts.' }, { resource: 'webhook', successStatus: 204 })
    .input(WebhookIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => removeWebhook(ctx, input.id)),

  deliveries: route({
    method: 'GET', path: `${ONE}/deliveries`,
    summary: 'A webhook\'s delivery attempts',
    description: `Every attempt, newest first, ${DELIVERIES_PAGE_SIZE} a page, kept as long as events are.`,
  }, { resource: 'webhook', queryParameters: ['page'] })
    .input(DeliveriesInput)
    .output(DeliveryPage)
    .query(({ ctx, input }) => deliveries(ctx, input)),

  replay: route({
    method: 'POST', path: `${ONE}/replay`,
    summary: 'Deliver events again',
    description: 'Delivers again every kept event after `replay.after` that matches the webhook\'s events, in order, before newer ones (with the same `webhook-id` as before). An id older than what is kept, or not in your log, is 410 `cursor_expired` with `meta.last_event_id`. A disabled webhook delivers them once enabled.',
  }, { resource: 'webhook', successStatus: 202, errorCodes: ['parameter_missing', 'invalid', 'cursor_expired'] })
    .input(ReplayWebhookInput)
    .output(WebhookDocument)
    .mutation(({ ctx, input }) => replay(ctx, input)),

  test: route({
    method: 'POST', path: `${ONE}/test`,
    summary: 'Send a test event',
    description: 'Delivers a `webhook.test` event (not in the change log, with a `webhook-id` of its own) whatever the webhook\'s events and state, once: its attempt shows in the deliveries.',
  }, { resource: 'webhook', successStatus: 202 })
    .input(WebhookIdInput)
    .output(WebhookDocument)
    .mutation(({ ctx, input }) => sendTestEvent(ctx, input.id)),

  rotateSecret: route({
    method: 'POST', path: `${ONE}/secret`,
    summary: 'A new signing secret',
    description: `Answers a new \`meta.secret\`. The secret it replaces keeps signing beside it until ${RETIRED_SECRET_HOURS} hours after this rotation, whatever rotations follow (\`webhook-signature\` carries one signature per secret, separated by spaces: two quick rotations sign with three secrets for a while), so receivers can switch without losing a delivery. While ${MAX_RETIRED_SECRETS} retired secrets still sign, another rotation is 429 \`rate_limited\`, with \`Retry-After\` the seconds until the oldest stops.`,
  }, { resource: 'webhook', successStatus: 201 })
    .input(WebhookIdInput)
    .output(WebhookWithSecretDocument)
    .mutation(({ ctx, input }) => newWebhookSecret(ctx, input.id)),
});
