/**
 * Webhook URLs written to fool a parser (API-CONTRACT.md §14): a URL is kept as its WHATWG
 * serialization, and a URL whose text holds a backslash is 422 `invalid` on `/webhook/url`
 * (`https://93.184.216.34\@127.0.0.1/` is 93.184.216.34 to a WHATWG parser and 127.0.0.1 to
 * others). Each URL goes through both doors, on create and on PATCH; what is answered and
 * stored is `new URL(text).href`, and the address guard looks up the host that serialization
 * names, at the request and again at an attempt (`postOnce` on the stored text).
 */
import { describe, expect, it } from 'vitest';
import { postOnce } from '../../src/webhooks/outbound.js';
import { trpcError } from '../helpers/hostile.js';
import { useTestAppWithSql } from '../helpers/test-app.js';
import { testResolver } from '../helpers/test-resolver.js';

const HOOKS = '/api/users/me/webhooks';
const ONE = (id: number) => `/api/webhooks/${id}`;
const PLAIN = 'https://plain.example.com/';

/** The names the address guard asked the resolver for, in order. */
const asked: string[] = [];
const resolver = testResolver();
const { app, db } = useTestAppWithSql({
  webhooks: {
    allowPrivateUrls: false,
    resolve: (hostname) => {
      asked.push(hostname);
      return resolver(hostname);
    },
  },
});

/** URLs the service takes, written oddly, and the serialization it keeps; `host`: the name it resolves (none for an IP literal). */
const TAKEN: Array<{ what: string; url: string; kept: string; host: string | null }> = [
  { what: 'upper-case scheme and host, the default port, a dot segment', url: 'HTTPS://HOOKS.Example.COM:443/Path/../In?Q=1#Frag', kept: 'https://hooks.example.com/In?Q=1#Frag', host: 'hooks.example.com' },
  { what: 'a tab in the host and a newline in the path (WHATWG drops them)', url: 'https://hooks.exa\tmple.com/in\n/x\r/y', kept: 'https://hooks.example.com/in/x/y', host: 'hooks.example.com' },
  { what: 'a tab between the two slashes (WHATWG drops it, as other parsers do)', url: 'https:/\t/hooks.example.com/', kept: 'https://hooks.example.com/', host: 'hooks.example.com' },
  { what: 'a percent-encoded host', url: 'https://hooks%2Eexample%2ECOM/', kept: 'https://hooks.example.com/', host: 'hooks.example.com' },
  { what: 'full-width letters in the host, a letter outside ASCII and a space in the path', url: 'https://ｈｏｏｋｓ.example.com/ü a', kept: 'https://hooks.example.com/%C3%BC%20a', host: 'hooks.example.com' },
  { what: 'an IPv6 literal with the default port', url: 'https://[2606:4700:4700:0::1111]:443/hook', kept: 'https://[2606:4700:4700::1111]/hook', host: null },
  { what: 'an IPv4 address written as one number', url: 'https://1572394766/', kept: 'https://93.184.215.14/', host: null },
  { what: 'an IPv4 address written in hexadecimal parts', url: 'https://0x5d.0xb8.0xd7.0x0e/', kept: 'https://93.184.215.14/', host: null },
];

/** URLs refused with 422 invalid on /webhook/url, whatever door and operation. */
const REFUSED: Array<{ what: string; url: string }> = [
  { what: 'the issue\'s URL: a backslash before user info', url: 'https://93.184.216.34\\@127.0.0.1/' },
  { what: 'a backslash before user info naming a public host', url: 'https://loopback.private.test\\@hooks.example.com/' },
  { what: 'backslashes in place of the slashes', url: 'https:\\\\hooks.example.com\\in' },
  { what: 'a backslash in the path', url: 'https://hooks.example.com/a\\b' },
  { what: 'a backslash in the query', url: 'https://hooks.example.com/?q=\\' },
  { what: 'a backslash in the fragment', url: 'https://hooks.example.com/#\\' },
  { what: 'a percent-encoded loopback address', url: 'https://%31%32%37.0.0.1/' },
  { what: 'a loopback address in hexadecimal and short form', url: 'https://0x7f.1/' },
  { what: 'a private name in upper case', url: 'https://LOOPBACK.PRIVATE.TEST/' },
  { what: 'a private name with a tab inside', url: 'https://loopback.pri\tvate.test/' },
  { what: 'an IPv6 link-local address with a zone', url: 'https://[fe80::1%25eth0]/' },
  { what: 'an IPv4-mapped loopback', url: 'https://[::ffff:127.0.0.1]/' },
  { what: 'user info', url: 'https://user@hooks.example.com/' },
  { what: 'an empty user info', url: 'https://@hooks.example.com/' },
  { what: 'an @ percent-encoded in the host', url: 'https://hooks.example.com%40loopback.private.test/' },
  // WHATWG finds a host in these; other common parsers (Python's urlsplit, Go's net/url) find none.
  { what: 'no slash after the scheme', url: 'https:hooks.example.com/' },
  { what: 'no slash after the scheme, an IPv4 host', url: 'https:93.184.215.14/' },
  { what: 'one slash after the scheme', url: 'https:/hooks.example.com/' },
  { what: 'three slashes after the scheme', url: 'https:///hooks.example.com/' },
];

type Door = 'rest' | 'trpc';
const DOORS: Door[] = ['rest', 'trpc'];

/** What a door answered: the webhook's URL, or the error's status, code and pointer. */
type Answer = { url: string; id: number } | { status: number; code: string; pointer: string | undefined };

async function create(door: Door, token: string, url: string): Promise<Answer> {
  if (door === 'trpc') {
    try {
      const { data } = await app.trpc(token).webhooks.create.mutate({ webhook: { url } });
      return { url: data.attributes.url, id: data.id };
    } catch (error) {
      const { httpStatus, errors } = await trpcError(Promise.reject(error));
      return { status: httpStatus, code: errors[0]?.code, pointer: errors[0]?.source?.pointer };
    }
  }
  const res = await app.request('POST', HOOKS, { token, body: { webhook: { url } } });
  if (res.status === 201) return { url: res.body.data.attributes.url, id: res.body.data.id };
  return { status: res.status, code: res.body.errors?.[0]?.code, pointer: res.body.errors?.[0]?.source?.pointer };
}

async function update(door: Door, token: string, id: number, url: string): Promise<Answer> {
  if (door === 'trpc') {
    try {
      const { data } = await app.trpc(token).webhooks.update.mutate({ id, webhook: { url } });
      return { url: data.attributes.url, id: data.id };
    } catch (error) {
      const { httpStatus, errors } = await trpcError(Promise.reject(error));
      return { status: httpStatus, code: errors[0]?.code, pointer: errors[0]?.source?.pointer };
    }
  }
  const res = await app.request('PATCH', ONE(id), { token, body: { webhook: { url } } });
  if (res.status === 200) return { url: res.body.data.attributes.url, id: res.body.data.id };
  return { status: res.status, code: res.body.errors?.[0]?.code, pointer: res.body.errors?.[0]?.source?.pointer };
}

async function storedUrls(userId: number): Promise<string[]> {
  return (await db.query('select url from webhooks where user_id = $1 order by id', [userId])).rows.map((r) => r.url);
}

const INVALID = { status: 422, code: 'invalid', pointer: '/webhook/url' };

describe.each(DOORS)('webhook URLs through %s', (door) => {
  it.each(TAKEN)('keeps $what as its serialization, on create and PATCH', async ({ url, kept, host }) => {
    const { id: userId, token } = await app.register();
    asked.length = 0;
    const made = await create(door, token, url);
    expect(made).toEqual({ url: kept, id: expect.any(Number) });
    const { id } = made as { id: number };
    expect(asked).toEqual(host === null ? [] : [host]);

    expect(await update(door, token, id, PLAIN)).toEqual({ url: PLAIN, id });
    asked.length = 0;
    expect(await update(door, token, id, url)).toEqual({ url: kept, id });
    expect(asked).toEqual(host === null ? [] : [host]);
    expect(await storedUrls(userId)).toEqual([kept]);
    expect(new URL(kept).href).toBe(kept);
    // The same URL written another way is the same URL: GET answers what was stored.
    expect((await app.request('GET', ONE(id), { token })).body.data.attributes.url).toBe(kept);

    // At an attempt, the guard looks up the host of what was stored, the same name as at the
    // request; one that now resolves to the loopback is blocked, and nothing is connected. (An
    // IP literal is its own address: an attempt would connect to it, so none is made here.)
    if (host !== null) {
      const atAttempt: string[] = [];
      const attempt = await postOnce(kept, {}, '{}', {
        timeoutMs: 1_000,
        allowPrivate: false,
        resolve: async (name) => (atAttempt.push(name), [{ address: '127.0.0.1', family: 4 }]),
      });
      expect(atAttempt).toEqual([host]);
      expect(attempt).toMatchObject({ outcome: 'blocked', httpStatus: null, error: expect.stringContaining('127.0.0.1') });
    }
  });

  it.each(REFUSED)('refuses $what with 422 invalid on /webhook/url, on create and PATCH, storing nothing', async ({ url }) => {
    const { id: userId, token } = await app.register();
    expect(await create(door, token, url)).toEqual(INVALID);
    expect(await storedUrls(userId)).toEqual([]);
    const made = await create(door, token, PLAIN);
    expect(made).toEqual({ url: PLAIN, id: expect.any(Number) });
    expect(await update(door, token, (made as { id: number }).id, url)).toEqual(INVALID);
    expect(await storedUrls(userId)).toEqual([PLAIN]);
  });
});

describe('a backslash is a fault of the body', () => {
  it('is reported beside the other errors of the request, on both doors', async () => {
    const { token } = await app.register();
    const webhook = { url: 'https://93.184.216.34\\@127.0.0.1/', events: ['task.nothing'] };
    const res = await app.request('POST', HOOKS, { token, body: { webhook } });
    expect(res.status, res.text).toBe(422);
    const pairs = (errors: any[]) => errors.map((e) => [e.code, e.source?.pointer]).sort();
    expect(pairs(res.body.errors)).toEqual([['invalid', '/webhook/events/0'], ['invalid', '/webhook/url']]);
    expect(res.body.errors.find((e: any) => e.source.pointer === '/webhook/url').detail).toMatch(/backslash/);
    const typed = await trpcError(app.trpc(token).webhooks.create.mutate({ webhook: webhook as never }));
    expect(pairs(typed.errors)).toEqual(pairs(res.body.errors));
  });
});
