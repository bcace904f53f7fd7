#!/usr/bin/env node
// Import cycles among src/core files (DESIGN.md §2: a core with no back-references).
//
//   node scripts/core-cycles.mjs [ROOT]     ROOT defaults to the repository
//
// Reads the imports of every src/core/**/*.ts with check-deps' extractor (static, type-only and
// import() alike), finds the strongly connected components of the file graph twice — once with
// every import, once with value imports only — and prints each cycle group with its edges, type-only
// ones marked. Exit 1 when any cycle remains, 0 otherwise.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { extractImports } from './check-deps.mjs';

const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
const core = join(root, 'src', 'core');

function walk(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const files = walk(core);
/** file → (imported core file → true when every import of it is type-only). */
const edges = new Map();
for (const f of files) {
  const out = new Map();
  for (const imp of extractImports(readFileSync(f, 'utf8'))) {
    if (!imp.spec.startsWith('.')) continue;
    const target = resolve(dirname(f), imp.spec.replace(/\.js$/, '.ts'));
    if (!target.startsWith(core)) continue;
    out.set(target, (out.get(target) ?? true) && imp.kind === 'type');
  }
  edges.set(f, out);
}

/** Tarjan's strongly connected components of more than one file. */
function cycles(valueOnly) {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const [w, typeOnly] of edges.get(v) ?? []) {
      if (valueOnly && typeOnly) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const group = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) found.push(group);
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return found;
}

const rel = (f) => relative(core, f).split('\\').join('/');
let total = 0;
for (const [label, valueOnly] of [
  ['all imports', false],
  ['value imports only', true],
]) {
  const groups = cycles(valueOnly);
  total += groups.length;
  console.log(`core-cycles: ${label}: ${groups.length} cycle group(s)`);
  for (const g of groups) {
    const members = new Set(g);
    console.log(`  ${g.map(rel).sort().join(', ')}`);
    for (const f of g)
      for (const [t, typeOnly] of edges.get(f))
        if (members.has(t)) console.log(`    ${rel(f)} -> ${rel(t)}${typeOnly ? ' (type-only)' : ''}`);
  }
}
process.exit(total > 0 ? 1 : 0);
