import { z } from 'zod';
import { inputObject, text } from '../core/fields.js';

export const usernameField = text({
  min: 1,
  max: 50,
  pattern: /^[a-z0-9_\-]+$/,
  patternDetail: 'Username may contain only a-z, 0-9, underscores and hyphens.',
  what: 'Username',
});
export const passwordField = text({ min: 8, max: 200, tooShort: 'too_short', what: 'Password' });

export const RegisterInput = inputObject({
  user: z.object({ username: usernameField, password: passwordField }),
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
  attributes: z.object({ username: z.string() }),
}).meta({ id: 'User' });

export const UserDocument = z.object({ data: UserResource });
export const UserWithTokenDocument = z.object({
  data: UserResource,
  meta: z.object({ token: z.string().meta({ description: 'Access token, shown only here. Valid 30 days.' }) }),
});

export function presentUser(user: { id: number; username: string }) {
  return { type: 'user' as const, id: user.id, attributes: { username: user.username } };
}
