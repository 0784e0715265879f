/**
 * Users and access tokens (API-CONTRACT.md §3) and the account (§16): a table of procedures,
 * each served by the use case beside this file; no logic lives here. The router is made by
 * the composition root (src/app/router.ts), which hands in what the account's export reads
 * of the features above this folder (src/app/account-export.ts).
 */
import { z } from 'zod';
import { noInput } from '../core/fields.js';
import { authedProcedure, routesUnder } from '../core/procedures.js';
import type { AccountSections } from '../core/account-export.js';
import { router } from '../core/trpc.js';
import { changePassword, changePasswordInputRules } from './change-password.js';
import { credentialsProcedure } from './credentials-procedure.js';
import { deleteUser } from './delete-user.js';
import { EXPORT_PAGE_SIZE, NDJSON, accountExportSchema, exportAccount } from './export-account.js';
import { logIn } from './log-in.js';
import { registerInputRules, registerUser } from './register-user.js';
import { revokeToken } from './revoke-token.js';
import { AuthorizeInput, ChangePasswordInput, DeleteUserInput, RegisterInput, UpdateUserInput, UserDocument, UserWithTokenDocument, presentUser } from './user.schema.js';
import { updateUser } from './update-user.js';

const route = routesUnder('users', authedProcedure);
const credentialsRoute = routesUnder('users', credentialsProcedure);

export const usersRouter = (sections: AccountSections) => router({
  register: credentialsRoute({
    method: 'POST', path: '/api/users', protect: false,
    summary: 'Register a user',
    description: 'Creates a user and returns a first access token in `meta.token`. Username: 1 to 50 characters of a-z, 0-9, `_`, `-`, unique regardless of case (capitals are `invalid`, and also `taken` when the name in lower case is someone\'s). Password: 8 to 200 characters. `time_zone` (optional, `UTC` by default): an IANA name, the zone of the user\'s "today".',
  }, { successStatus: 201, errorCodes: ['parameter_missing', 'invalid', 'too_long', 'too_short', 'taken'], inputRules: registerInputRules })
    .input(RegisterInput)
    .output(UserWithTokenDocument)
    .mutation(({ ctx, input }) => registerUser(ctx, input)),

  authorize: credentialsRoute({
    method: 'POST', path: '/api/users/authorizations', protect: false,
    summary: 'Log in',
    description: 'Exchanges a username and password for a new access token (valid 30 days). Wrong credentials are 401 `login_failed`.',
  }, { successStatus: 201, errorCodes: ['parameter_missing', 'invalid', 'too_long', 'login_failed'] })
    .input(AuthorizeInput)
    .output(UserWithTokenDocument)
    .mutation(({ ctx, input }) => logIn(ctx, input)),

  me: route({ method: 'GET', path: '/api/users/me', summary: 'The current user' })
    .input(noInput)
    .output(UserDocument)
    .query(({ ctx }) => ({ data: presentUser(ctx.user) })),

  update: route({
    method: 'PATCH', path: '/api/users/me',
    summary: 'Change the current user\'s time zone',
    description: 'Sets `time_zone`, an IANA name (`Europe/Paris`, `America/New_York`, `UTC`; a name the tz database does not know is 422 `invalid`). Every rule that says "today" (a project\'s `due_at` and `finished_at`, the task list\'s 14-day window, `planned_on`) uses the user\'s day in that zone from the next request on.',
  }, { keyed: true, errorCodes: ['parameter_missing', 'invalid'] })
    .input(UpdateUserInput)
    .output(UserDocument)
    .mutation(({ ctx, input }) => updateUser(ctx, input)),

  changePassword: route({
    method: 'PUT', path: '/api/users/me/password',
    summary: 'Change the password',
    description: 'Takes the current password and a new one (8 to 200 characters). A wrong current password is 422 `invalid` on `/user/current_password`; each attempt counts against the login rate limit of the user and of the client address. Every other session token of the user is revoked (their event streams end); the token of this request and the personal access tokens stay valid.',
  }, { successStatus: 204, keyed: true, errorCodes: ['parameter_missing', 'invalid', 'too_short', 'too_long'], inputRules: changePasswordInputRules })
    .input(ChangePasswordInput)
    .output(z.void())
    .mutation(({ ctx, input }) => changePassword(ctx, input)),

  delete: route({
    method: 'POST', path: '/api/users/me/deletion',
    summary: 'Delete the account',
    description: 'Takes the password (in the body, never in a URL) and deletes the user and everything theirs in one transaction: projects, tasks, the change log, webhooks and their deliveries, tokens, idempotency records, stream tickets. The username is free again at once; no webhook request is sent after the answer; the user\'s event streams end. A wrong password is 422 `invalid` on `/user/password`; each attempt counts against the login rate limit of the user and of the client address. An `Idempotency-Key` is held to its form (422 `invalid`) but nothing is kept under it: a retry is 401, the token gone.',
  }, { successStatus: 204, errorCodes: ['parameter_missing', 'invalid', 'too_long'] })
    .input(DeleteUserInput)
    .output(z.void())
    .mutation(({ ctx, input }) => deleteUser(ctx, input)),

  revoke: route({
    method: 'DELETE', path: '/api/users/me/authorizations/current',
    summary: 'Log out',
    description: 'Revokes the access token used for this request. Other tokens of the user stay valid. An `Idempotency-Key` is held to its form (422 `invalid`) but nothing is kept under it: a retry is 401, the token gone.',
  }, { successStatus: 204, errorCodes: ['invalid'] })
    .input(noInput)
    .output(z.void())
    .mutation(({ ctx }) => revokeToken(ctx)),

  export: route({
    method: 'GET', path: '/api/users/me/export',
    summary: 'Everything of the current user, as one document',
    description: [
      'The user, every project, every task (also abandoned ones and ones finished long ago, which the task list leaves out) and every webhook (without its secrets), each as its own GET shows it under `data`, in one snapshot of the account, in order of id.',
      `Sent as an attachment (\`Content-Disposition: attachment; filename="export.json"\`) and streamed (read ${EXPORT_PAGE_SIZE} records at a time), whatever the size of the account.`,
      `With \`Accept: ${NDJSON}\`: the same items as NDJSON (\`filename="export.ndjson"\`), one JSON object a line: the user first, then each project, task and webhook, each with its \`type\`.`,
      'On /trpc (`users.export`, called alone) the same JSON document, streamed too, inside tRPC\'s envelope.',
    ].join('\n\n'),
  })
    .input(noInput)
    .output(accountExportSchema(sections))
    .query(({ ctx }) => exportAccount(ctx, sections)),
});
