/**
 * The documentation holds together: README.md is the entrance and docs/ holds the rest, so a
 * link that no longer resolves, an architecture page that forgets a folder of src/ or names one
 * that is gone, a README grown back into a manual, or a test file over 900 lines fails here.
 * Pure file reads, no server.
 * (README's runnable blocks, and those of docs/change-log.md, docs/webhooks.md and
 * docs/operations.md, are run by test/system/readme.test.ts and the deployment tests.)
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

function markdownUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return markdownUnder(file);
    return entry.name.endsWith('.md') ? [file] : [];
  });
}

/** The pages whose links must resolve. */
const PAGES = ['README.md', 'test/README.md', 'bench/README.md', ...markdownUnder('docs')];

/** The lines of a page outside its fenced code blocks (their text is code, not Markdown). */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/**
 * The anchor GitHub gives a heading (github-slugger): its text as rendered, lower case, every
 * character but letters, digits, marks, `_`, `-` and spaces dropped, spaces made `-`; a
 * repeated slug gets `-1`, `-2`, ...
 */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const rendered = m[1]!.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = rendered.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Every inline link target of a page's prose (not in code blocks or code spans). */
function linksOf(text: string): string[] {
  const prose = proseLines(text).join('\n').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}

describe('the documentation', () => {
  it('has every relative link resolve to a file, and every #anchor to a heading of it', () => {
    const problems: string[] = [];
    let checked = 0;
    for (const page of PAGES) {
      for (const link of linksOf(read(page))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:, ...
        checked++;
        const [target, anchor] = link.split('#', 2) as [string, string | undefined];
        const file = target === '' ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), decodeURI(target)));
        if (file.startsWith('..') || !existsSync(path.join(ROOT, file))) {
          problems.push(`${page}: ${link} (no ${file})`);
          continue;
        }
        if (anchor !== undefined) {
          if (!file.endsWith('.md') || statSync(path.join(ROOT, file)).isDirectory()) {
            problems.push(`${page}: ${link} (an anchor into ${file}, which is no Markdown page)`);
          } else if (!anchorsOf(read(file)).has(anchor)) {
            problems.push(`${page}: ${link} (no heading of ${file} has the anchor #${anchor})`);
          }
        }
      }
    }
    expect(checked, 'no relative link found: has the format changed?').toBeGreaterThan(30);
    expect(problems).toEqual([]);
  });

  it('names only paths of the repository that exist, in README.md and docs/', () => {
    const problems: string[] = [];
    for (const page of ['README.md', ...markdownUnder('docs')]) {
      const text = read(page);
      for (const m of text.matchAll(/(?<![\w./-])((?:src|test|bench|clients)\/[\w./-]*)/g)) {
        const named = m[1]!.replace(/[.,:;]+$/, '');
        if (/[*<]/.test(text.slice(m.index! + m[0].length, m.index! + m[0].length + 1))) continue; // a pattern: src/*/x.ts, test/<tier>/
        const candidates = [named, named.replace(/\.js$/, '.ts')];
        if (!candidates.some((c) => existsSync(path.join(ROOT, c)))) problems.push(`${page}: ${named}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('has an architecture page that names every folder of src/, and no folder of src/ that is gone', () => {
    const page = read('docs/architecture.md');
    const folders = readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(folders.length).toBeGreaterThan(5);
    const missing = folders.filter((folder) => !new RegExp(`(?<![\\w.-])${folder}/`).test(page));
    expect(missing, 'folders of src/ the architecture page does not name').toEqual([]);

    // The map of src/: the first column of each line under `src/` in its code block.
    const block = /```\n(src\/\n[\s\S]*?)\n```/.exec(page);
    expect(block, 'a code block that maps src/').not.toBeNull();
    const named: string[] = [];
    for (const line of block![1]!.split('\n').slice(1)) {
      if (!line.startsWith(' ')) break; // the folders beside src/ (clients/, test/, bench/)
      if (line.startsWith('   ')) continue; // a description's next line
      const column = line.trim().split(/\s{2,}/)[0]!;
      named.push(...column.split(/[\s,]+/).filter(Boolean));
    }
    expect(named.length).toBeGreaterThan(10);
    const gone = named.filter((name) => !existsSync(path.join(ROOT, 'src', name)));
    expect(gone, 'names in the map of src/ that are not in src/').toEqual([]);
    const unmapped = folders.filter((folder) => !named.includes(`${folder}/`));
    expect(unmapped, 'folders of src/ missing from the map').toEqual([]);
    // Anywhere on the page, src/<folder>/ names a folder that exists.
    const namedElsewhere = [...page.matchAll(/src\/([\w-]+)\//g)].map((m) => m[1]!);
    expect(namedElsewhere.filter((folder) => !folders.includes(folder))).toEqual([]);
  });

  it('keeps README.md and bench/README.md to at most 300 lines each', () => {
    for (const page of ['README.md', 'bench/README.md']) {
      const lines = read(page).split('\n').length - (read(page).endsWith('\n') ? 1 : 0);
      expect(lines, `${page} lines`).toBeLessThanOrEqual(300);
    }
  });

  it('keeps every test file to at most 900 lines: a longer one is split by what it tests', () => {
    const files = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
        const file = path.posix.join(dir, entry.name);
        if (entry.isDirectory()) return files(file);
        return entry.name.endsWith('.test.ts') ? [file] : [];
      });
    const all = files('test');
    expect(all.length).toBeGreaterThan(100);
    const over = all.map((file) => [file, read(file).split('\n').length] as const).filter(([, lines]) => lines > 900);
    expect(over).toEqual([]);
  });
});

describe('anchorsOf, as GitHub makes them', () => {
  it('drops punctuation, keeps letters, digits, - and _, and numbers repeats', () => {
    const anchors = anchorsOf(
      '# On Citus (past one machine)\n## API-CONTRACT §10: change log\n## `npm run bench:cpu`\n## Same\n## Same\n```\n# not a heading\n```\n## Before and after #29\n## snake_case & [a link](x.md)',
    );
    expect([...anchors]).toEqual([
      'on-citus-past-one-machine',
      'api-contract-10-change-log',
      'npm-run-benchcpu',
      'same',
      'same-1',
      'before-and-after-29',
      'snake_case--a-link',
    ]);
  });
});
