/**
 * Where a webhook may send (API-CONTRACT.md §14): the shape of a webhook URL, whether an IP
 * address is public, and the addresses a URL's host resolves to, every one of them checked.
 *
 * The host is resolved once per attempt and the connection then goes to the address checked
 * here (src/webhooks/outbound.ts), never to a second answer of the resolver: a name whose
 * answer changes between the check and the connect (DNS rebinding) cannot reach an internal
 * address. `allowPrivate` (`WEBHOOK_ALLOW_PRIVATE_URLS=1`) lifts the address rules and allows
 * `http:`, for development and tests only.
 */
import { promises as dns } from 'node:dns';
import net from 'node:net';

/** Longest webhook URL, in characters. */
export const MAX_URL_LENGTH = 2048;

export type ResolvedAddress = { address: string; family: 4 | 6 };

/** Resolves a host name to all its addresses (default: dns.promises.lookup(host, {all: true, verbatim: true})). */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

/**
 * Lookups at once. getaddrinfo runs on libuv's few threads, which logins (scrypt) and the
 * database driver need too: a name server that never answers must not take them all, so the
 * lookups of webhook URLs wait for one of these places (and their callers give up on time).
 */
const LOOKUPS_AT_ONCE = 2;
let lookups = 0;
const waiting: Array<() => void> = [];

/** The system resolver (getaddrinfo: hosts file, then DNS), every address in the order it gives them. */
export const systemResolve: Resolve = async (hostname) => {
  if (lookups >= LOOKUPS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
  else lookups++;
  try {
    const found = await dns.lookup(hostname, { all: true, order: 'verbatim' });
    return found.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
  } finally {
    // The place goes to the next lookup waiting, or back.
    const next = waiting.shift();
    if (next) next();
    else lookups--;
  }
};

/**
 * The ranges that are not public, most specific first within a family, each with the phrase a
 * refusal names it by. An IPv6 address outside 2000::/3 (global unicast, the only block IANA
 * allocates from) is refused as well, whatever it is.
 */
const IPV4_RANGES: [string, number, string][] = [
  ['0.0.0.0', 8, 'an unspecified ("this network") address'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (CGNAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'a reserved (IETF protocol assignment) address'],
  ['192.0.2.0', 24, 'a documentation address'],
  ['192.88.99.0', 24, 'a reserved (6to4 relay) address'],
  ['192.168.0.0', 16, 'a private address'],
  ['198.18.0.0', 15, 'a benchmarking address'],
  ['198.51.100.0', 24, 'a documentation address'],
  ['203.0.113.0', 24, 'a documentation address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['255.255.255.255', 32, 'the broadcast address'],
  ['240.0.0.0', 4, 'a reserved address'],
];

const IPV6_RANGES: [string, number, string][] = [
  ['::', 128, 'the unspecified address'],
  ['::1', 128, 'a loopback address'],
  ['::ffff:0:0', 96, 'an IPv4-mapped address'],
  ['::', 96, 'an IPv4-compatible address'],
  ['64:ff9b::', 96, 'a NAT64 address'],
  ['64:ff9b:1::', 48, 'a NAT64 address'],
  ['100::', 64, 'a discard address'],
  ['2001::', 32, 'a Teredo address'],
  ['2001:db8::', 32, 'a documentation address'],
  // Benchmarking 2001:2::/48, ORCHID and the other IETF protocol assignments.
  ['2001::', 23, 'a reserved (IETF protocol assignment) address'],
  ['2002::', 16, 'a 6to4 address'],
  ['3fff::', 20, 'a documentation address'],
  ['fc00::', 7, 'a unique-local address'],
  ['fe80::', 10, 'a link-local address'],
  ['fec0::', 10, 'a site-local address'],
  ['ff00::', 8, 'a multicast address'],
];

/** One BlockList per range, so that a refusal can say which range it fell in. */
function compile(ranges: [string, number, string][], type: 'ipv4' | 'ipv6'): { list: net.BlockList; kind: string }[] {
  return ranges.map(([network, prefix, kind]) => {
    const list = new net.BlockList();
    list.addSubnet(network, prefix, type);
    return { list, kind };
  });
}

const IPV4_CHECKS = compile(IPV4_RANGES, 'ipv4');
const IPV6_CHECKS = compile(IPV6_RANGES, 'ipv6');
const GLOBAL_UNICAST = new net.BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

/** Why an address is not public, as a phrase ("a loopback address"), or null when it is public. */
function nonPublicKind(ip: string): string | null {
  if (typeof ip !== 'string') return 'not an IP address';
  // A zone index (fe80::1%eth0) names an interface of this machine: never a public destination.
  if (ip.includes('%')) return 'an address scoped to a local interface';
  const version = net.isIP(ip);
  if (version === 4) return IPV4_CHECKS.find(({ list }) => list.check(ip, 'ipv4'))?.kind ?? null;
  if (version === 6) {
    const kind = IPV6_CHECKS.find(({ list }) => list.check(ip, 'ipv6'))?.kind;
    if (kind) return kind;
    return GLOBAL_UNICAST.check(ip, 'ipv6') ? null : 'a reserved (not global unicast) address';
  }
  return 'not an IP address';
}

/**
 * Whether an address is public: not loopback, private (10/8, 172.16/12, 192.168/16),
 * link-local (169.254/16, fe80::/10), CGNAT (100.64/10), multicast (224/4, ff00::/8),
 * unspecified (0.0.0.0/8, ::), broadcast, reserved 240/4, benchmarking 198.18/15,
 * documentation (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20),
 * 192.0.0/24, 192.88.99/24, unique-local fc00::/7, IPv4-mapped ::ffff:0:0/96 (whatever the
 * IPv4 inside), IPv4-compatible ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
 * 2002::/16, 2001::/23 (Teredo, benchmarking, ORCHID), discard 100::/64, site-local
 * fec0::/10, nor any other IPv6 outside 2000::/3. Anything not a valid IP literal (brackets
 * included) is not public. Never throws.
 */
export function isPublicAddress(ip: string): boolean {
  try {
    return nonPublicKind(ip) === null;
  } catch {
    return false;
  }
}

/** A host as an address: the brackets of an IPv6 literal removed. */
function bare(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/**
 * Whether the authority of a raw URL holds an '@' (user info), read as the WHATWG parser reads
 * it: tabs and newlines dropped, the scheme and any run of slashes or backslashes skipped, up
 * to the first '/', '\', '?' or '#'. `https://@host/` parses with an empty user name, which
 * URL.username cannot tell from none.
 */
function authorityHasAt(raw: string): boolean {
  const cleaned = raw.replace(/[\t\n\r]/g, '').replace(/^[\u0000-\u0020]+/, '');
  const afterScheme = cleaned.replace(/^[a-zA-Z][a-zA-Z0-9+.-]*:/, '').replace(/^[/\\]*/, '');
  const end = afterScheme.search(/[/\\?#]/);
  return (end < 0 ? afterScheme : afterScheme.slice(0, end)).includes('@');
}

/**
 * Syntax check of a webhook URL (API-CONTRACT §14), as sent or, at an attempt, as `kept`:
 * returns the parsed URL, whose `href` (its WHATWG serialization) is what the service keeps
 * and delivers to, or a detail sentence for a 422 `invalid`. What the address rules check is
 * that URL's host.
 */
export function checkUrlShape(raw: string, allowPrivate: boolean, { kept = false } = {}): { url: URL } | { refused: string } {
  if (typeof raw !== 'string') return { refused: 'The URL must be a string.' };
  // Characters are code points, as every length of the API counts them (API-CONTRACT.md §1), of
  // the URL as sent. A `kept` URL, its serialization, was held to the limit when it was set and
  // may be longer (each é is written %C3%A9, an emoji in 12 characters): not measured again, or
  // a URL accepted would be blocked at every attempt.
  if (!kept && raw.length > MAX_URL_LENGTH && [...raw].length > MAX_URL_LENGTH) {
    return { refused: `The URL is longer than ${MAX_URL_LENGTH.toLocaleString('en-US')} characters.` };
  }
  // Space around it would be dropped by the parser without a word: refused rather than guessed at.
  if (raw.trim() !== raw) return { refused: 'The URL must not start or end with spaces.' };
  // A WHATWG parser reads a backslash as a slash in an http(s) URL, where other common parsers
  // keep it: `https://a\@b/` names the host a to one and b to the other. Refused wherever it stands.
  if (raw.includes('\\')) return { refused: 'The URL must not contain a backslash (\\): parsers disagree on where its host ends.' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { refused: 'The URL is not an absolute URL.' };
  }
  const allowed = allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol)) {
    return { refused: allowPrivate ? 'The URL must start with https: or http:.' : 'The URL must start with https:.' };
  }
  if (url.username !== '' || url.password !== '' || authorityHasAt(raw)) {
    return { refused: 'The URL must not hold a user name or password.' };
  }
  // A WHATWG parser finds the host of `https:host/`, `https:/host/` and `https:///host/` too, where
  // other common parsers find none (or an empty one): only `scheme://host` names it to all of them.
  if (!/^https?:\/\/[^/]/i.test(raw.replace(/[\t\n\r]/g, ''))) {
    return { refused: 'The URL must be written scheme://host, with two slashes: parsers disagree on the host of other forms.' };
  }
  if (url.hostname === '') return { refused: 'The URL has no host.' };
  const host = bare(url.hostname);
  if (!allowPrivate && net.isIP(host) !== 0) {
    const kind = nonPublicKind(host);
    if (kind !== null) return { refused: `The URL's host ${host} is ${kind}; webhooks go to public addresses only.` };
  }
  return { url };
}

/** The code of a resolver's error (ENOTFOUND, EAI_AGAIN...), or a word when it has none. */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code !== '' ? code : 'lookup failed';
}

/**
 * Resolves the URL's host (an IP literal is its own single address) and checks every address;
 * returns the first address to connect to, or why it is refused. With allowPrivate, any
 * address passes. A resolver error (ENOTFOUND etc.) is a refusal too, with a clear detail.
 * One address that is not public among public ones refuses the whole name.
 */
export async function resolveChecked(
  url: URL,
  options: { allowPrivate: boolean; resolve?: Resolve },
): Promise<{ address: ResolvedAddress } | { refused: string }> {
  const host = bare(url.hostname);
  if (host === '') return { refused: 'The URL has no host.' };
  let found: ResolvedAddress[];
  const literal = net.isIP(host);
  if (literal !== 0) {
    found = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      found = await (options.resolve ?? systemResolve)(host);
    } catch (error) {
      return { refused: `The URL's host ${host} could not be resolved (${errorCode(error)}).` };
    }
  }
  if (!Array.isArray(found) || found.length === 0) return { refused: `The URL's host ${host} resolves to no address.` };
  const addresses: ResolvedAddress[] = [];
  for (const entry of found) {
    const address = typeof entry?.address === 'string' ? entry.address : '';
    const version = net.isIP(address);
    if (version === 0) return { refused: `The URL's host ${host} resolves to something that is not an IP address.` };
    if (!options.allowPrivate) {
      const kind = nonPublicKind(address);
      if (kind !== null) return { refused: `The URL's host resolves to ${address}, ${kind}; webhooks go to public addresses only.` };
    }
    addresses.push({ address, family: version === 6 ? 6 : 4 });
  }
  return { address: addresses[0]! };
}
