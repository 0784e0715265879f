/**
 * test/README.md maps every rule of SPEC.md and API-CONTRACT.md to the tests that prove it.
 * This keeps the map from rotting when tests move or are renamed: every test it names must
 * exist under the titles it gives (each a whole string literal of the file, in the order
 * given), every helper it names must exist, and its error table must have exactly one row per
 * code of the catalogue. The reference format is described at the top of the README.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/core/errors.js';

const TEST_DIR = path.resolve(import.meta.dirname, '..');
const README = readFileSync(path.join(TEST_DIR, 'README.md'), 'utf8');

/** The README without its fenced code blocks (commands, not references). */
const prose = README.split(/^```.*$/m)
  .filter((_, i) => i % 2 === 0)
  .join('\n');

interface Reference {
  file: string;
  titles: string[];
}

/** Every `file.test.ts` › `title` › … of the README. */
const references: Reference[] = [...prose.matchAll(/`([^`\s]+\.test\.ts)`((?:[ \t]*›[ \t]*`[^`]+`)+)/g)].map((m) => ({
  file: m[1]!,
  titles: [...m[2]!.matchAll(/`([^`]+)`/g)].map((t) => t[1]!),
}));

const sources = new Map<string, string | undefined>();
/** A test file's text with the escapes of its string literals resolved, or undefined if it is missing. */
function sourceOf(file: string): string | undefined {
  if (!sources.has(file)) {
    const full = path.join(TEST_DIR, file);
    sources.set(file, existsSync(full) ? readFileSync(full, 'utf8').replace(/\\(['"`\\])/g, '$1') : undefined);
  }
  return sources.get(file);
}

/** Where `title` stands as a whole string literal in `text`, at or after `from`; -1 if nowhere. */
function literalAt(text: string, title: string, from: number): number {
  const found = ["'", '"', '`'].map((q) => text.indexOf(`${q}${title}${q}`, from)).filter((i) => i >= 0);
  return found.length ? Math.min(...found) : -1;
}

/** The lines of the README section under `## heading`, up to the next `## `. */
function section(heading: string): string[] {
  const lines = README.split('\n');
  const start = lines.indexOf(`## ${heading}`);
  if (start < 0) return [];
  const end = lines.findIndex((line, i) => i > start && line.startsWith('## '));
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

describe('test/README.md', () => {
  it('names tests that exist: each file, and each of its titles as a string literal of that file, in order', () => {
    expect(references.length, 'no reference found: has the format changed?').toBeGreaterThan(300);
    const problems: string[] = [];
    for (const { file, titles } of references) {
      const text = sourceOf(file);
      if (text === undefined) {
        problems.push(`${file}: no such file under test/`);
        continue;
      }
      let from = 0;
      for (const title of titles) {
        const at = literalAt(text, title, from);
        if (at < 0) {
          problems.push(`${file}: no title "${title}"${from > 0 ? ` after "${titles[titles.indexOf(title) - 1]}"` : ''}`);
          break;
        }
        from = at + title.length;
      }
    }
    expect([...new Set(problems)]).toEqual([]);
  });

  it('names test files and helpers that exist', () => {
    const named = [...prose.matchAll(/`((?:rules|procedures|http|system|hostile|helpers)\/[^`\s]+\.ts)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(10);
    expect([...new Set(named)].filter((file) => !existsSync(path.join(TEST_DIR, file)))).toEqual([]);
  });

  it('has one row per code of ERROR_CATALOGUE in its error table, each naming a test or saying why not for both doors', () => {
    const rows = section('Error codes').filter((line) => line.startsWith('| `'));
    const codes = rows.map((row) => /^\| `([a-z_]+)` \|/.exec(row)?.[1]);
    expect(codes.filter((code, i) => codes.indexOf(code) !== i), 'codes listed twice').toEqual([]);
    expect([...codes].sort()).toEqual(Object.keys(ERROR_CATALOGUE).sort());
    for (const row of rows) {
      const [, code, , rest, trpc] = row.split('|').map((cell) => cell.trim());
      for (const [door, cell] of [['REST', rest], ['tRPC', trpc]] as const) {
        expect(cell, `${code} ${door}`).toMatch(/\.test\.ts`|^not covered|^—/);
      }
    }
  });

  it('lists under Not covered every code that a door leaves uncovered', () => {
    const notCovered = section('Not covered').join('\n');
    expect(notCovered.length).toBeGreaterThan(0);
    const uncovered = section('Error codes')
      .filter((line) => line.startsWith('| `'))
      .filter((row) => row.split('|').slice(3, 5).some((cell) => cell.trim().startsWith('not covered')))
      .map((row) => /^\| `([a-z_]+)` \|/.exec(row)![1]!);
    expect(uncovered.length).toBeGreaterThan(0);
    expect(uncovered.filter((code) => !notCovered.includes(`\`${code}\``))).toEqual([]);
  });
});
