import { Migration } from '@mikro-orm/migrations';

/**
 * Personal access tokens (API-CONTRACT.md §16) beside the session tokens of register and login:
 * - `kind`: `session` (every scope, 30 days) or `personal` (made by the user, with its scopes);
 * - `name`: what the user called a personal token (a session's is null);
 * - `scopes`: a personal token's scopes; null for a session, which has every scope;
 * - `last_used_at`: when the token was last used, written at most once a minute per token.
 * Tokens are listed by user, newest first: (user_id, id) serves that list and the reads by id.
 */
export class Migration20261201000000_personal_tokens extends Migration {
  override name = 'Migration20261201000000_personal_tokens';

  override up(): void {
    this.addSql(`alter table "access_tokens"
      add column "kind" text not null default 'session' check ("kind" in ('session', 'personal')),
      add column "name" text,
      add column "scopes" text[],
      add column "last_used_at" timestamptz;`);
    this.addSql(`drop index "access_tokens_user_id_index";`);
    this.addSql(`create index "access_tokens_user_id_id_index" on "access_tokens" ("user_id", "id");`);
  }

  override down(): void {
    this.addSql(`drop index "access_tokens_user_id_id_index";`);
    this.addSql(`create index "access_tokens_user_id_index" on "access_tokens" ("user_id");`);
    this.addSql(`alter table "access_tokens" drop column "kind", drop column "name", drop column "scopes", drop column "last_used_at";`);
  }
}
