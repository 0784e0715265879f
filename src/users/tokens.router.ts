/**
 * Personal access tokens and the tokens of a user (API-CONTRACT.md §16): a table of
 * procedures, each served by manage-tokens.ts; no logic lives here.
 */
import { z } from 'zod';
import { noInput } from '../core/fields.js';
import { authedProcedure, routesUnder } from '../core/procedures.js';
import { router } from '../core/trpc.js';
import { TOKENS_PATH, createToken, currentToken, getToken, listTokens, revokeTokenById, tokenInputRules } from './manage-tokens.js';
import {
  CreateTokenInput, MAX_PERSONAL_TOKENS, MAX_TOKEN_DAYS, TOKENS_PAGE_SIZE, TokenDocument, TokenIdInput, TokenListInput, TokenPage,
  TokenWithSecretDocument,
} from './token.schema.js';

const route = routesUnder('tokens', authedProcedure);
const ONE = '/api/tokens/{id}';

export const tokensRouter = router({
  create: route({
    method: 'POST', path: TOKENS_PATH,
    summary: 'Make a personal access token',
    description: [
      'A token for a script, an app or an automation, limited to its `scopes` and ending at `expires_at` (at most ' + MAX_TOKEN_DAYS + ' days ahead). `meta.secret` is the token: it begins with `plnr_`, and only its hash is kept with the token. Sent with an `Idempotency-Key`, the answer, secret included, is also kept under the key for its 24 hours (then deleted), so that a retry gets the token it made rather than a second one; without a key it is shown this once.',
      `At most ${MAX_PERSONAL_TOKENS} live personal tokens per user (422 \`limit_reached\`). \`tokens:manage\` and \`account\` only from a session token; a personal token gives no scope it does not have (403 \`insufficient_scope\`).`,
    ].join('\n\n'),
  }, {
    successStatus: 201,
    keyed: true,
    errorCodes: ['parameter_missing', 'invalid', 'too_long', 'limit_reached', 'insufficient_scope'],
    inputRules: tokenInputRules,
  })
    .input(CreateTokenInput)
    .output(TokenWithSecretDocument)
    .mutation(({ ctx, input }) => createToken(ctx, input)),

  list: route({
    method: 'GET', path: TOKENS_PATH,
    summary: 'Your tokens',
    description: `Every live token of yours, session tokens included, newest first, ${TOKENS_PAGE_SIZE} a page; \`current\` marks the one making this request.`,
  }, { queryParameters: ['page'] })
    .input(TokenListInput)
    .output(TokenPage)
    .query(({ ctx, input }) => listTokens(ctx, input)),

  current: route({ method: 'GET', path: `${TOKENS_PATH}/current`, summary: 'The token in use', description: 'The token that made this request; any token may read itself.' })
    .input(noInput)
    .output(TokenDocument)
    .query(({ ctx }) => currentToken(ctx)),

  get: route({
    method: 'GET', path: ONE, summary: 'A token',
    description: 'One of your live tokens. An id that is unknown, malformed, expired, revoked or another user\'s is 404 `record_not_found`.',
  }, { resource: 'token' })
    .input(TokenIdInput)
    .output(TokenDocument)
    .query(({ ctx, input }) => getToken(ctx, input.id)),

  revoke: route({
    method: 'DELETE', path: ONE, summary: 'Revoke a token',
    description: 'The token stops working at once, on every instance; its open event streams end within seconds.',
  }, { resource: 'token', successStatus: 204, keyed: true })
    .input(TokenIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => revokeTokenById(ctx, input.id)),
});
