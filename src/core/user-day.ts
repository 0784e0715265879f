/**
 * A user's day (API-CONTRACT.md §1, §13): the one definition of "today", "after today", "the
 * end of today", "the day 14 days ago" and "that date" in the user's time zone, used by every
 * rule (the project's date rules, the task list's window, `planned_on`). Statements never
 * interpret a zone: they get the instants computed here, so Node's ICU time zone data is the
 * only one that decides (PostgreSQL's is never asked).
 *
 * A day starts at the first instant whose local date is that day: at midnight, or, where the
 * zone skips midnight (a daylight-saving change at 00:00), at the first instant after the
 * gap. Days are 23, 24 or 25 hours long (or other lengths where the zone says so).
 */

import { TZ_NAMES } from './tz-names.js';

/** Every user without a zone of their own has this one. */
export const DEFAULT_TIME_ZONE = 'UTC';

/** A calendar date; month 1 to 12. */
export interface LocalDate {
  year: number;
  month: number;
  day: number;
}

/** The user's current day: `start` is its first instant, `next` the first instant of tomorrow. */
export interface UserDay {
  zone: string;
  date: LocalDate;
  start: Date;
  next: Date;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: 'numeric', day: 'numeric' });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** An IANA zone name as a name (`Area/Location`, `UTC`, `EST5EDT`), not an offset such as `+01:00`. */
export const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+\-]*(?:\/[A-Za-z0-9_+\-]+){0,3}$/;

/** The tz database's names by lower case: each in its tz spelling. */
let namesByLowerCase: Map<string, string> | undefined;
/** Whether ICU knows `zone`: its formatter is made (and kept) when first asked for; all of them at once cost a process half a second. */
function icuKnows(zone: string): boolean {
  try {
    formatterOf(zone);
    return true;
  } catch {
    return false;
  }
}

/**
 * The zone as stored and shown, when `name` is a name of the tz database (in any case:
 * `europe/paris` is `Europe/Paris`; `Asia/Kolkata` stays so, though ICU calls it
 * `Asia/Calcutta`) that ICU knows; undefined otherwise: offsets, unknown names, and ICU's own
 * ids that are not tz names (`BST`, `IST`). So a zone has one spelling, and this process knows
 * at most as many zones as the tz database has.
 */
export function timeZoneOf(name: string): string | undefined {
  if (name.length > 64 || !ZONE_NAME.test(name)) return undefined;
  namesByLowerCase ??= new Map(TZ_NAMES.map((tzName) => [tzName.toLowerCase(), tzName]));
  const zone = namesByLowerCase.get(name.toLowerCase());
  return zone !== undefined && icuKnows(zone) ? zone : undefined;
}

/** The local date of `instant` in `zone`. */
export function localDateOf(instant: Date, zone: string): LocalDate {
  const date = { year: 0, month: 0, day: 0 };
  for (const part of formatterOf(zone).formatToParts(instant)) {
    if (part.type === 'year' || part.type === 'month' || part.type === 'day') date[part.type] = Number(part.value);
  }
  return date;
}

const HOUR_MS = 3_600_000;

/** The date as a number that orders like the date: 20261127. */
const keyOf = (d: LocalDate) => d.year * 10_000 + d.month * 100 + d.day;

/** The date `days` days after `date` (before it when negative), by the calendar. */
export function addDays(date: LocalDate, days: number): LocalDate {
  const at = new Date(0);
  at.setUTCFullYear(date.year, date.month - 1, date.day + days);
  return { year: at.getUTCFullYear(), month: at.getUTCMonth() + 1, day: at.getUTCDate() };
}

const starts = new Map<string, number>();
const MAX_CACHED_STARTS = 10_000;

/**
 * The first instant, in whole seconds, whose local date in `zone` is `date`. Offsets lie
 * between −12 h and +14 h, so that instant lies between the date's UTC midnight − 15 h (still
 * the day before everywhere) and + 13 h (the day itself or later everywhere): a binary search
 * over those 28 hours, to the second, on the local date. Kept per zone and date.
 */
export function startOfDate(date: LocalDate, zone: string): Date {
  const cacheKey = `${zone} ${keyOf(date)}`;
  const cached = starts.get(cacheKey);
  if (cached !== undefined) return new Date(cached);
  const utcMidnight = new Date(0);
  utcMidnight.setUTCFullYear(date.year, date.month - 1, date.day);
  const target = keyOf(date);
  let before = (utcMidnight.getTime() - 15 * HOUR_MS) / 1000; // local date < target
  let atOrAfter = (utcMidnight.getTime() + 13 * HOUR_MS) / 1000; // local date >= target
  while (atOrAfter - before > 1) {
    const middle = Math.floor((before + atOrAfter) / 2);
    if (keyOf(localDateOf(new Date(middle * 1000), zone)) >= target) atOrAfter = middle;
    else before = middle;
  }
  if (starts.size >= MAX_CACHED_STARTS) starts.clear();
  starts.set(cacheKey, atOrAfter * 1000);
  return new Date(atOrAfter * 1000);
}

/** The user's day at `now`: its date, its first instant, and the first instant of the next. */
export function userDay(now: Date, zone: string): UserDay {
  // A day holds for every instant from its start to the next's: the last one found in a zone
  // is given again while it holds (every write and list asks for the user's day).
  const last = lastDays.get(zone);
  if (last && now.getTime() >= last.start.getTime() && now.getTime() < last.next.getTime()) return last;
  const date = localDateOf(now, zone);
  const day = Object.freeze({ zone, date: Object.freeze(date), start: startOfDate(date, zone), next: startOfDate(addDays(date, 1), zone) });
  lastDays.set(zone, day);
  return day;
}

/** The day `userDay` found last, per zone (one entry a zone, of the tz database's few hundred). */
const lastDays = new Map<string, UserDay>();

/** The last whole second of the day (the inclusive end of "today"). */
export function endOfDay(day: UserDay): Date {
  return new Date(day.next.getTime() - 1000);
}

/** The first instant of the day `days` calendar days before `day` (14 days ago: `daysAgo(day, 14)`). */
export function daysAgo(day: UserDay, days: number): Date {
  return startOfDate(addDays(day.date, -days), day.zone);
}

/** `YYYY-MM-DD` as a date, when it names one that exists. */
export function parseLocalDate(text: string): LocalDate | undefined {
  const match = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(text);
  if (!match) return undefined;
  const date = { year: Number(match[1]), month: Number(match[2]), day: Number(match[3]) };
  const check = new Date(0);
  check.setUTCFullYear(date.year, date.month - 1, date.day);
  const exists = check.getUTCFullYear() === date.year && check.getUTCMonth() + 1 === date.month && check.getUTCDate() === date.day;
  return exists ? date : undefined;
}
