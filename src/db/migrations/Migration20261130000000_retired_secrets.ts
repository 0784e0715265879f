import { Migration } from '@mikro-orm/migrations';

/**
 * Every secret a rotation retires signs until 24 hours after its own rotation, whatever
 * rotations follow (API-CONTRACT.md §14): two rotations within a day sign with three secrets.
 * One `previous_secret` could hold one of them; a second rotation overwrote it, and the first
 * secret stopped signing at once.
 *
 * - `retired_secrets` and `retired_until`: the retired secrets, oldest first, and when each
 *   stops signing, the same place in both (the CHECK keeps their lengths equal). Arrays of
 *   plain types rather than JSON: the copy below, a statement over every user, stays free of
 *   functions that Citus refuses on columns (`to_jsonb`, `jsonb_build_object` are STABLE).
 *   A rotation writes both whole, the expired ones left out (src/webhooks/webhook.store.ts).
 * - A previous secret still kept moves into them, so a receiver mid-rotation loses nothing.
 */
export class Migration20261130000000_retired_secrets extends Migration {
  override name = 'Migration20261130000000_retired_secrets';

  override up(): void {
    this.addSql(`alter table "webhooks"
      add column "retired_secrets" text[] not null default '{}',
      add column "retired_until" timestamptz[] not null default '{}',
      add constraint "webhooks_retired_secrets_check" check (cardinality("retired_secrets") = cardinality("retired_until"));`);
    this.addSql(`update "webhooks" set "retired_secrets" = array["previous_secret"], "retired_until" = array["previous_secret_until"]
      where "previous_secret" is not null and "previous_secret_until" is not null;`);
    this.addSql(`alter table "webhooks" drop column "previous_secret", drop column "previous_secret_until";`);
  }

  override down(): void {
    this.addSql(`alter table "webhooks" add column "previous_secret" text, add column "previous_secret_until" timestamptz;`);
    // The newest retired secret is the previous one; older ones stop signing.
    this.addSql(`update "webhooks" set "previous_secret" = "retired_secrets"[cardinality("retired_secrets")],
      "previous_secret_until" = "retired_until"[cardinality("retired_until")]
      where cardinality("retired_secrets") > 0;`);
    this.addSql(`alter table "webhooks" drop constraint "webhooks_retired_secrets_check",
      drop column "retired_secrets", drop column "retired_until";`);
  }
}
