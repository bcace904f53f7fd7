/**
 * scripts/check-lines.mjs (issue 32, DESIGN.md §6) on small fixture trees: lines of 140 columns
 * pass, each longer one is reported as `file:line (N columns)`; generated and vendored code,
 * node_modules, declaration files and non-code files are not read.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = pathToFileURL(resolve(__dirname, '../../scripts/check-lines.mjs')).href;
// The checker itself, in process (the unit tier spawns nothing); the CLI wrapper prints these lines.
const { longLines, MAX } = (await import(SCRIPT)) as { longLines: (root: string) => string[]; MAX: number };

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'sbx-check-lines-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const line = (n: number) => `// ${'x'.repeat(n - 3)}`;

describe('check-lines', () => {
  it('passes lines of exactly 140 columns, and counts a multi-byte character as one column', () => {
    expect(MAX).toBe(140);
    const wide = `const s = '${'×'.repeat(MAX - 13)}';`;
    expect([...wide].length).toBe(MAX);
    expect(Buffer.byteLength(wide)).toBeGreaterThan(MAX);
    expect(longLines(tree({ 'src/a.ts': `${line(MAX)}\n${wide}\n`, 'bin/sbx.js': `${line(MAX)}\n` }))).toEqual([]);
  });

  it('reports each longer line with its file, line number and width, in every checked folder', () => {
    const root = tree({
      'src/core/a.ts': `ok\n${line(MAX + 1)}\nok\n${line(200)}\n`,
      'test/unit/b.test.ts': line(150),
      'scripts/c.mjs': line(141),
      'bench/lib/d.mjs': line(160),
      'bin/e.js': line(142),
      'src/f.mts': line(143),
    });
    expect(longLines(root)).toEqual([
      'src/core/a.ts:2 (141 columns)',
      'src/core/a.ts:4 (200 columns)',
      'src/f.mts:1 (143 columns)',
      'test/unit/b.test.ts:1 (150 columns)',
      'scripts/c.mjs:1 (141 columns)',
      'bench/lib/d.mjs:1 (160 columns)',
      'bin/e.js:1 (142 columns)',
    ]);
  });

  it('skips generated and vendored code, node_modules, hidden folders, .d.ts and non-code files', () => {
    const long = line(300);
    const root = tree({
      'src/transports/e2b/envd/gen/process/process_pb.ts': long,
      'src/transports/ui/web/vendor/xterm.js': long,
      'src/node_modules/x/index.js': long,
      'src/.cache/y.ts': long,
      'src/types.d.ts': long,
      'src/README.md': long,
      'docs/z.ts': long,
      // A folder merely named like a skipped one elsewhere is still read.
      'src/other/gen/kept.ts': long,
    });
    expect(longLines(root)).toEqual(['src/other/gen/kept.ts:1 (300 columns)']);
  });
});
