/**
 * The procedure of registration and login (API-CONTRACT.md §3): public, and limited per
 * client address and, for a login, per username.
 */
import { isRecord, publicProcedure, rateLimited } from '../core/procedures.js';

/**
 * Registration and login: limited per client address, and a login also per username (any
 * case), so that one account cannot be guessed from many addresses.
 */
export const credentialsProcedure = publicProcedure.use(
  rateLimited(
    (ctx) => ctx.rateLimits.authPerMinute,
    (ctx, raw) => {
      const username = isRecord(raw) ? raw.username : undefined;
      return [`ip:${ctx.clientIp}`, ...(typeof username === 'string' ? [`login:${username.toLowerCase()}`] : [])];
    },
    'auth',
  ),
);

