import { Migration } from '@mikro-orm/migrations';

/**
 * `sending_until` on a webhook: set by the deliverer just before it sends a request (in the
 * statement that checks the webhook and its user are still there), cleared when the attempt
 * is recorded, and never later than the end of that request's time limit. A deletion of the
 * account (API-CONTRACT.md §16) waits, under the user's lock, until none of the user's
 * webhooks has one, so no request of the user's webhooks is sent after the deletion is
 * answered (src/webhooks/deliverer.ts, src/users/delete-user.ts).
 */
export class Migration20261202000000_webhook_sending extends Migration {
  override name = 'Migration20261202000000_webhook_sending';

  override up(): void {
    this.addSql(`alter table "webhooks" add column "sending_until" timestamptz;`);
  }

  override down(): void {
    this.addSql(`alter table "webhooks" drop column "sending_until";`);
  }
}
