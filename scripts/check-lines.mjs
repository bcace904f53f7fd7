#!/usr/bin/env node
// Line length (issue 32, DESIGN.md §6): no line of the sources, tests, scripts or benchmarks is
// longer than 140 columns. The formatter wraps code; this catches what it leaves alone (strings,
// comments, template literals). Prints `file:line (N columns)` for each and exits 1 when any.
//   node scripts/check-lines.mjs [ROOT]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, dirname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAX = 140;
const DIRS = ['src', 'test', 'scripts', 'bench', 'bin'];
const EXT = /\.(ts|mts|mjs|js)$/;
// Generated or vendored code is not ours to wrap (the same folders biome.json leaves out).
const SKIP = ['src/transports/e2b/envd/gen', 'src/transports/ui/web/vendor'];

function* walk(root, dir) {
  let names;
  try {
    names = readdirSync(dir).sort();
  } catch {
    return;
  }
  for (const name of names) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (SKIP.includes(relative(root, p).split(sep).join('/'))) continue;
    if (statSync(p).isDirectory()) yield* walk(root, p);
    else if (EXT.test(name) && !name.endsWith('.d.ts')) yield p;
  }
}

/** Every line over MAX columns (code points) under `root`, as `file:line (N columns)`. */
export function longLines(root) {
  const long = [];
  for (const d of DIRS) {
    for (const file of walk(root, join(root, d))) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        const cols = [...line].length;
        if (cols > MAX) long.push(`${relative(root, file).split(sep).join('/')}:${i + 1} (${cols} columns)`);
      });
    }
  }
  return long;
}

const isMain = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const long = longLines(root);
  for (const l of long) process.stderr.write(`${l}\n`);
  if (long.length) {
    process.stderr.write(`check-lines: ${long.length} line(s) longer than ${MAX} columns\n`);
    process.exit(1);
  }
  process.stdout.write('check-lines: ok\n');
}
