import names from './tz-names.json' with { type: 'json' };

/**
 * The names of the IANA time zone database: every zone and every link (`Asia/Kolkata`,
 * `US/Eastern`, `UTC`), as the tz database spells them, 597 of them. A user's
 * `time_zone` must be one of these (API-CONTRACT.md §13): ICU also takes its own three-letter
 * ids (`BST` is Dhaka, `IST` Kolkata, `ECT` Paris), which are not tz names and mean another
 * zone than a user who writes them does.
 *
 * Taken from the tz database PostgreSQL ships (its `share/timezone`, less `posix/`, `right/`
 * and `Factory`); test/rules/user-day.test.ts holds the list to the one in the locked
 * embedded PostgreSQL, and every name to one ICU knows. They are data, kept in tz-names.json
 * (one a line, sorted), so that a release of the database changes lines there.
 */
export const TZ_NAMES: readonly string[] = names;
