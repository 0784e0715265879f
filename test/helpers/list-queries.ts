/**
 * What the list-query tests share (API-CONTRACT.md §7, §12): a list query written for each
 * door (REST query string, tRPC input), the links a page must carry, and a reference that
 * filters, sorts and pages a user's items the way §12 says.
 *
 * A query here is a tRPC-shaped input: lists as arrays, `null` for `none`; the REST query
 * string is written from it (lists comma-joined, `none` for null, text percent-encoded).
 */
import { expect } from 'vitest';
import { withEtag } from '../../src/client.js';
import { META } from './envelope.js';
import type { ApiResponse, TestApp } from './test-app.js';

export type ListKind = 'tasks' | 'projects';
export const LIST_PATH: Record<ListKind, string> = { tasks: '/api/users/me/tasks', projects: '/api/users/me/projects' };
export const DEFAULT_PAGE_SIZE: Record<ListKind, number> = { tasks: 50, projects: 25 };

export type ListQuery = Record<string, unknown>;

/** A parameter's value as a link or a REST query writes it, decoded: lists comma-joined, null as `none`. */
export function paramText(value: unknown): string {
  if (Array.isArray(value)) return value.map((v) => (v === null ? 'none' : String(v))).join(',');
  return String(value);
}

export interface RestQueryOptions {
  /** The order of the parameters in the query string (others follow in input order). */
  order?: readonly string[];
  /** Writes the commas of lists as %2C. */
  encodeCommas?: boolean;
  /** Unknown parameters to add (name, already-encoded value). */
  extra?: ReadonlyArray<readonly [string, string]>;
}

/** The REST query string of a query (without `?`); members that are undefined are left out. */
export function restQuery(query: ListQuery, options: RestQueryOptions = {}): string {
  const names = Object.keys(query).filter((name) => query[name] !== undefined);
  const ordered = options.order ? [...options.order.filter((n) => names.includes(n)), ...names.filter((n) => !options.order!.includes(n))] : names;
  const parts = ordered.map((name) => {
    const value = query[name];
    const text = Array.isArray(value)
      ? value.map((v) => (v === null ? 'none' : encodeURIComponent(String(v)))).join(options.encodeCommas ? '%2C' : ',')
      : encodeURIComponent(String(value));
    return `${name}=${text}`;
  });
  for (const [name, value] of options.extra ?? []) parts.push(`${name}=${value}`);
  return parts.join('&');
}

export interface ExpectedLinks {
  first: number;
  last: number;
  prev?: number;
  next?: number;
}

/** The pages §7 links to: first and last always (last at least 1), prev when page > 1, next when page < last. */
export function expectedLinks(page: number, size: number, total: number): ExpectedLinks {
  const last = Math.max(1, Math.ceil(total / size));
  const links: ExpectedLinks = { first: 1, last };
  if (page > 1) links.prev = page - 1;
  if (page < last) links.next = page + 1;
  return links;
}

/**
 * What is wrong with a page's links: each must be `<base><path>?…` with every parameter of
 * the query (page aside) once, with the value given, the `unknown` parameters the request
 * added (REST: §12's links keep every parameter of the request, also those the list ignores),
 * and `page` naming the expected page. The order of the parameters in a link is not part of the contract.
 */
export function linkProblems(actual: unknown, expected: ExpectedLinks, base: string, path: string, query: ListQuery, unknown: RestQueryOptions['extra'] = []): string[] {
  const problems: string[] = [];
  if (typeof actual !== 'object' || actual === null) return [`links is not an object: ${JSON.stringify(actual)}`];
  const links = actual as Record<string, unknown>;
  const want = Object.keys(expected).sort();
  const got = Object.keys(links).sort();
  if (JSON.stringify(want) !== JSON.stringify(got)) problems.push(`links has ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  const params = new Map<string, string>();
  for (const [name, value] of Object.entries(query)) if (name !== 'page' && value !== undefined) params.set(name, paramText(value));
  for (const [name, value] of new URLSearchParams(unknown.map(([name, value]) => `${name}=${value}`).join('&'))) params.set(name, value);
  for (const key of want) {
    const link = links[key];
    const page = expected[key as keyof ExpectedLinks]!;
    if (typeof link !== 'string') {
      problems.push(`links.${key} is not a string`);
      continue;
    }
    let url: URL;
    try {
      url = new URL(link);
    } catch {
      problems.push(`links.${key} is not a URL: ${link}`);
      continue;
    }
    if (`${url.origin}${url.pathname}` !== `${base}${path}`) problems.push(`links.${key} points at ${url.origin}${url.pathname}, not ${base}${path}`);
    const entries = [...url.searchParams.entries()];
    const names = entries.map(([name]) => name);
    if (new Set(names).size !== names.length) problems.push(`links.${key} repeats a parameter: ${link}`);
    const seen = new Map(entries);
    const wantParams = new Map(params);
    wantParams.set('page', String(page));
    for (const [name, value] of wantParams) {
      if (seen.get(name) !== value) problems.push(`links.${key} has ${name}=${JSON.stringify(seen.get(name))}, expected ${JSON.stringify(value)}: ${link}`);
    }
    for (const name of seen.keys()) if (!wantParams.has(name)) problems.push(`links.${key} has a parameter ${name} the request did not give: ${link}`);
  }
  return problems;
}

/** Compares by Unicode code point (not UTF-16 unit), as `collate "C"` on UTF-8 does. */
export function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** Whether `text` contains `q`, both in Unicode lower case (§12). */
export const containsFolded = (text: string, q: string) => text.toLowerCase().includes(q.toLowerCase());

/** Items sorted by one attribute (numbers, or text by code point), `-` for descending; ties by id ascending. */
export function sortItems<T extends { id: number; attributes: Record<string, unknown> }>(items: readonly T[], sort: string): T[] {
  const descending = sort.startsWith('-');
  const attribute = descending ? sort.slice(1) : sort;
  const key = (item: T) => (attribute === 'id' ? item.id : item.attributes[attribute]);
  return [...items].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    const c = typeof ka === 'string' ? byCodePoint(ka, kb as string) : (ka as number) - (kb as number);
    if (c !== 0) return descending ? -c : c;
    return a.id - b.id;
  });
}

export interface DoorAnswer {
  door: 'rest' | 'trpc';
  request: string;
  status: number;
  body: any;
  etag: string | null;
}

/** GET a list on /api with this query (and extra query-string options). */
export async function restList(app: TestApp, kind: ListKind, token: string, query: ListQuery, options: RestQueryOptions = {}, headers: Record<string, string> = {}): Promise<DoorAnswer> {
  const qs = restQuery(query, options);
  const path = qs ? `${LIST_PATH[kind]}?${qs}` : LIST_PATH[kind];
  const res: ApiResponse = await app.request('GET', path, { token, headers });
  return { door: 'rest', request: `GET ${path}`, status: res.status, body: res.body, etag: res.headers.get('etag') };
}

/** The list procedure on /trpc with this input (the typed client); a 304 gives status 304. */
export async function trpcList(app: TestApp, kind: ListKind, token: string, query: ListQuery, ifNoneMatch?: string): Promise<DoorAnswer> {
  const api = app.trpc(token) as any;
  const request = `tRPC ${kind}.list(${JSON.stringify(query)})`;
  try {
    const answer = await withEtag((o) => api[kind].list.query(query, o), ifNoneMatch === undefined ? {} : { ifNoneMatch });
    return { door: 'trpc', request, status: answer.notModified ? 304 : 200, body: answer.data, etag: answer.etag };
  } catch (error: any) {
    return { door: 'trpc', request, status: error?.data?.httpStatus ?? 0, body: error?.data ?? String(error), etag: null };
  }
}

/** Both doors, one after the other. */
export async function bothDoors(app: TestApp, kind: ListKind, token: string, query: ListQuery, options: RestQueryOptions = {}): Promise<DoorAnswer[]> {
  return [await restList(app, kind, token, query, options), await trpcList(app, kind, token, query)];
}

const idsOf = (items: unknown) => (Array.isArray(items) ? items.map((i: any) => i?.id) : items);

/**
 * Asserts that an answer is the page `page` of `expected` (the whole filtered and sorted
 * list), with the links of §7 and §12 and the stability notice.
 */
export function expectPage(answer: DoorAnswer, expected: readonly unknown[], page: number, size: number, base: string, kind: ListKind, query: ListQuery, context = '', unknown: RestQueryOptions['extra'] = []): void {
  const where = `${answer.request}${context ? `\n  ${context}` : ''}`;
  expect(answer.status, `${where}\n  answered ${JSON.stringify(answer.body)?.slice(0, 600)}`).toBe(200);
  const want = expected.slice((page - 1) * size, page * size);
  const got = answer.body?.data;
  if (JSON.stringify(idsOf(got)) !== JSON.stringify(idsOf(want))) {
    expect.fail(`${where}\n  page ${page} (size ${size}) of ${expected.length} items: ids ${JSON.stringify(idsOf(got))}, expected ${JSON.stringify(idsOf(want))}`);
  }
  expect(got, where).toEqual(want);
  expect(answer.body.meta, where).toEqual(META);
  expect(Object.keys(answer.body).sort(), where).toEqual(['data', 'links', 'meta']);
  const problems = linkProblems(answer.body.links, expectedLinks(page, size, expected.length), base, LIST_PATH[kind], query, answer.door === 'rest' ? unknown : []);
  if (problems.length > 0) expect.fail(`${where}\n  ${problems.join('\n  ')}`);
}

/**
 * The pages to check of a list of `last` pages: every one, the one after the last, and
 * `page` (the query's own, perhaps far beyond); past `most` pages, the first and the last few.
 */
export function pagesToCheck(last: number, page: number | undefined, most = 250): number[] {
  const pages = new Set<number>();
  if (last <= most) for (let p = 1; p <= last + 1; p++) pages.add(p);
  else for (const p of [1, 2, 3, last - 2, last - 1, last, last + 1]) pages.add(p);
  if (page !== undefined) pages.add(page);
  return [...pages].sort((a, b) => a - b);
}

/** Every page of a list with these parameters, read with `page_size=200` on /api. */
export async function readWholeList(app: TestApp, kind: ListKind, token: string, query: ListQuery = {}): Promise<any[]> {
  const items: any[] = [];
  for (let page = 1; page < 1000; page++) {
    const answer = await restList(app, kind, token, { ...query, page_size: 200, page });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    items.push(...answer.body.data);
    if (!answer.body.links.next) return items;
  }
  throw new Error('more than 1000 pages');
}

/** Whether JS `toLowerCase` and PostgreSQL's ICU `lower` (root locale, as the service folds) agree on each text. */
export async function icuLowerDisagreements(app: TestApp, texts: readonly string[]): Promise<string[]> {
  const rows = await app.orm.em.fork().execute<Array<{ t: string; l: string }>>(
    `select t, lower(t collate "und-x-icu") as l from (values ${texts.map(() => '(?::text)').join(', ')}) as v(t)`,
    [...texts],
  );
  return rows.filter((r) => r.t.toLowerCase() !== r.l).map((r) => `${JSON.stringify(r.t)}: JS ${JSON.stringify(r.t.toLowerCase())}, ICU ${JSON.stringify(r.l)}`);
}

/**
 * Checks every page of a query against `expected` (the whole filtered and sorted list): on
 * both doors as a client writes the query (every page, the one after the last, the query's own
 * page), then on /api as a client follows the links: `next` from the first page to the last,
 * which must be where `last` points. Returns the number of requests made.
 */
export async function checkEveryPage(
  app: TestApp,
  kind: ListKind,
  token: string,
  query: ListQuery,
  expected: readonly unknown[],
  restOptions: RestQueryOptions,
  context: string,
): Promise<number> {
  const size = (query.page_size as number | undefined) ?? DEFAULT_PAGE_SIZE[kind];
  const last = Math.max(1, Math.ceil(expected.length / size));
  let requests = 0;
  for (const page of pagesToCheck(last, query.page as number | undefined)) {
    const paged: ListQuery = { ...query, page: page === 1 && query.page === undefined ? undefined : page };
    for (const answer of await bothDoors(app, kind, token, paged, restOptions)) {
      expectPage(answer, expected, page, size, app.baseUrl, kind, paged, context, restOptions.extra);
      requests += 1;
    }
  }
  const first = await restList(app, kind, token, { ...query, page: undefined }, restOptions);
  requests += 1;
  const lastLink = first.body?.links?.last as string;
  let link: string | undefined = first.body?.links?.first;
  for (let page = 1; link !== undefined; page++) {
    const url = new URL(link);
    const res: ApiResponse = await app.request('GET', `${url.pathname}${url.search}`, { token });
    requests += 1;
    const answer: DoorAnswer = { door: 'rest', request: `GET ${url.pathname}${url.search} (followed from the links)`, status: res.status, body: res.body, etag: res.headers.get('etag') };
    expectPage(answer, expected, page, size, app.baseUrl, kind, { ...query, page }, context, restOptions.extra);
    if (answer.body.links.next === undefined) expect(link, `${answer.request}: the page without next is the last`).toBe(lastLink);
    link = answer.body.links.next;
  }
  return requests;
}
