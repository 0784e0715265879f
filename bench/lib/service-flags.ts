/**
 * The Node flags `npm start` runs the service with (package.json), so that the bench measures
 * what production runs. test/rules/start-flags.test.ts keeps the two equal.
 *
 * `--max-semi-space-size=16`: V8 sizes the young generation from the heap limit, which on a
 * machine with 24 GiB is far more than this service's short-lived garbage needs; capped at
 * 16 MB a semi-space, the process peaked at about 250 MB RSS under 32 connections of list
 * requests instead of about 365 MB, at the same throughput (bench/README.md, "Memory").
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=16'];
