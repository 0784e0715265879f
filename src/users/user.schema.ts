import { z } from 'zod';
import { inputObject, text } from '../core/fields.js';
import { ZONE_NAME, timeZoneOf } from '../core/user-day.js';

export const usernameField = text({
  min: 1,
  max: 50,
  pattern: /^[a-z0-9_\-]+$/,
  patternDetail: 'Username may contain only a-z, 0-9, underscores and hyphens.',
  what: 'Username',
});
export const passwordField = text({ min: 8, max: 200, tooShort: 'too_short', what: 'Password' });

/**
 * An IANA time zone name (API-CONTRACT.md §13), read as the zone it names: `europe/paris` is
 * `Europe/Paris`. A name the tz database does not know (or an offset) is `invalid`.
 */
export const timeZoneField = z
  .string()
  .transform((name, ctx) => {
    const zone = timeZoneOf(name);
    if (zone === undefined) {
      ctx.addIssue({ code: 'custom', message: 'time_zone must be an IANA time zone name, such as Europe/Paris or UTC.', params: { code: 'invalid' } });
      return z.NEVER;
    }
    return zone;
  })
  .meta({
    description: 'An IANA time zone name (`Europe/Paris`, `America/New_York`, `UTC`): the zone of every "today" rule of this user. A name the tz database does not know is 422 `invalid`.',
    pattern: ZONE_NAME.source,
    maxLength: 64,
    example: 'Europe/Paris',
  });

export const RegisterInput = inputObject({
  user: z.object({ username: usernameField, password: passwordField, time_zone: timeZoneField.optional() }),
});

export const UpdateUserInput = inputObject({
  user: z.object({ time_zone: timeZoneField.optional() }),
});

/**
 * PUT /api/users/me/password (API-CONTRACT.md §16): the current password as any text a
 * registration could have stored (a wrong one is 422 `invalid` on `/user/current_password`),
 * the new one as registration takes it (§3).
 */
export const ChangePasswordInput = inputObject({
  user: z.object({
    current_password: text({ max: 1000, what: 'Current password' }).meta({ example: 'correct horse battery staple' }),
    password: passwordField,
  }),
});

/** POST /api/users/me/deletion (API-CONTRACT.md §16): the password, in the body, never in a URL. */
export const DeleteUserInput = inputObject({
  user: z.object({ password: text({ max: 1000, what: 'Password' }).meta({ example: 'correct horse battery staple' }) }),
});

// Login takes any text a registration could have stored (no NUL, no lone surrogate);
// a well-formed but wrong pair is 401 login_failed.
export const AuthorizeInput = inputObject({
  username: text({ max: 1000, what: 'Username' }).meta({ example: 'alice' }),
  password: text({ max: 1000, what: 'Password' }).meta({ example: 'correct horse battery staple' }),
});

export const UserResource = z.object({
  type: z.literal('user'),
  id: z.int(),
  attributes: z.object({
    username: z.string(),
    timeZone: z.string().meta({ description: 'The IANA time zone of the user\'s "today" (API-CONTRACT.md §13).', example: 'Europe/Paris' }),
  }),
}).meta({ id: 'User' });

export const UserDocument = z.object({ data: UserResource });
export const UserWithTokenDocument = z.object({
  data: UserResource,
  meta: z.object({ token: z.string().meta({ description: 'Access token, shown only here. Valid 30 days.' }) }),
});

export function presentUser(user: { id: number; username: string; timeZone: string }) {
  return { type: 'user' as const, id: user.id, attributes: { username: user.username, timeZone: user.timeZone } };
}
