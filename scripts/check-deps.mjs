#!/usr/bin/env node
// Dependency rules of DESIGN.md §2, checked on the source tree (run by `npm test`).
//
//   node scripts/check-deps.mjs [ROOT]     ROOT defaults to the repository (its src/ and bin/sbx.js)
//
// It reads every src/**/*.ts, extracts static imports and `export … from` (type-only ones count:
// they are dependencies of the design too) and, separately, dynamic `import()` calls, resolves
// relative specifiers to layers, applies the rules below and prints each violation as
// `file:line imports X (rule)`. Exit 1 when there is any, 0 otherwise. No exceptions list.
//
// Start path: the modules `sbx` loads for every command are src/cli.ts plus the modules src/cli.ts
// itself imports (statically or with import(): bin/sbx.js imports dist/cli.js, which imports the
// registry and the program). From those roots only static, non-type imports are followed;
// fastify, better-sqlite3, dockerode and ink must not be reached. An import() inside a command is
// fine: it runs only when that command does.
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, dirname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const HEAVY = ['fastify', 'better-sqlite3', 'dockerode', 'ink', '@modelcontextprotocol/sdk'];
const CLIENT_PACKAGES = ['undici', 'eventsource', 'ws'];
const BUILTINS = new Set(builtinModules);

function walk(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Line number (1-based) of a character offset. */
function lineAt(text, index) {
  let line = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Comments blanked (same length, newlines kept) so offsets and line numbers stay right. */
function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\/|(^|[^:'"`\\])\/\/[^\n]*/g, (m, pre) => {
    const keep = pre ?? '';
    return keep + m.slice(keep.length).replace(/[^\n]/g, ' ');
  });
}

/** Static imports / re-exports and dynamic import() calls of one file. */
export function extractImports(source) {
  const text = stripComments(source);
  const found = [];
  const staticRe = /(^|[\n;])\s*(import|export)\s+(type\s+)?([^'";]*?\sfrom\s*)?['"]([^'"]+)['"]/g;
  for (let m; (m = staticRe.exec(text)); ) {
    const clause = m[4] ?? '';
    if (m[2] === 'export' && !clause) continue; // `export 'x'` is not a thing
    const typeOnly = Boolean(m[3]) || /^\{\s*(type\s+[^,}]+,?\s*)+\}\s*from\s*$/.test(clause.trim() + ' ');
    const at = m.index + m[0].lastIndexOf(m[5]) - 1;
    found.push({ spec: m[5], line: lineAt(text, at), kind: typeOnly ? 'type' : 'static' });
  }
  const dynRe = /(^|[^.\w$])import\s*\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (let m; (m = dynRe.exec(text)); ) {
    // `typeof import('x')` / `import('x').T` in a type position is a type reference, not a load.
    const before = text.slice(Math.max(0, m.index - 12), m.index + m[1].length);
    const typeRef = /typeof\s*$/.test(before) || /^\s*\.\s*[A-Z]/.test(text.slice(dynRe.lastIndex));
    found.push({ spec: m[2], line: lineAt(text, m.index + m[1].length), kind: typeRef ? 'type' : 'dynamic' });
  }
  return found;
}

/** Layer of a source file path relative to src/ (posix separators). */
export function layerOf(rel) {
  const parts = rel.split('/');
  // The entry points (cli.ts, index.ts) may import anything, like compose: they wire the package.
  if (parts.length === 1) return ['cli.ts', 'index.ts'].includes(parts[0]) ? 'compose' : 'shared';
  if (parts[0] === 'transports') return parts.length === 2 ? 'transports/shared' : `transports/${parts[1]}`;
  return parts[0];
}

function resolveRelative(srcDir, fromFile, spec) {
  const base = resolve(dirname(fromFile), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), `${base}.ts`, join(base, 'index.ts'), base];
  for (const c of candidates) if (existsSync(c) && statSync(c).isFile()) return c;
  return base.replace(/\.js$/, '.ts');
}

function packageName(spec) {
  if (spec.startsWith('node:')) return spec;
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** Layers each layer may import (DESIGN.md §2), besides itself, `shared` and the packages allowed below. */
const MAY_IMPORT = {
  core: ['core'],
  contracts: ['contracts'],
  shared: [],
  client: ['contracts'],
  log: [],
  config: ['contracts', 'log'],
  adapters: ['core', 'contracts', 'log'],
  // A transport: core, contracts, client, config, log and transports/shared, never a sibling.
  transport: ['core', 'contracts', 'client', 'config', 'log', 'transports/shared'],
  'transports/shared': ['core', 'contracts', 'client', 'config', 'log'],
};

/** The rule a (static, dynamic or type) import breaks, or undefined. `to` is a layer or `pkg:<name>`. */
function breaks(fromLayer, fromRel, to, kind) {
  const pkg = to.startsWith('pkg:') ? to.slice(4) : undefined;
  const builtin = pkg !== undefined && (pkg.startsWith('node:') || BUILTINS.has(pkg));
  if (to === 'outside') return 'imports reach only into src/';
  if (fromLayer === 'core') {
    // node:crypto only, for hashing and HMAC (worker credentials); time and ids come through ports.
    if (pkg !== undefined) return pkg === 'node:crypto' ? undefined : 'core imports only core (and node:crypto for hashing)';
    return to === 'core' || to === 'shared' ? undefined : 'core imports only core (and the pure helpers of shared)';
  }
  if (fromLayer === 'contracts') {
    if (pkg !== undefined) return pkg === '@sinclair/typebox' ? undefined : 'contracts import only the schema library';
    return to === 'contracts' || to === 'shared' ? undefined : 'contracts import only contracts (and the pure helpers of shared)';
  }
  if (fromLayer === 'shared') {
    if (pkg !== undefined) return builtin ? undefined : 'shared helpers import only node builtins';
    return to === 'shared' ? undefined : 'shared helpers import nothing of the project';
  }
  if (fromLayer === 'client') {
    if (pkg !== undefined)
      return builtin || CLIENT_PACKAGES.includes(pkg) ? undefined : 'client imports only node builtins, undici, eventsource, ws';
    return to === 'client' || to === 'contracts' || to === 'shared' ? undefined : 'client imports only contracts and shared';
  }
  if (pkg !== undefined) return undefined;
  if (fromLayer === 'compose') return undefined;
  if (to === 'compose') {
    return /^transports\/cli\/(commands\/(serve|worker|provider-server|mcp)|shared\/doctor-local)\.ts$/.test(fromRel)
      ? undefined
      : "nothing imports compose except the commands that start a process (serve, worker, provider-server, mcp) and doctor's local checks";
  }
  if (fromLayer === to || to === 'shared') return undefined;
  if (fromLayer === 'transports/cli' && to === 'config' && kind !== 'dynamic' && kind !== 'type')
    return 'the CLI reaches config only through compose or an import() inside a command';
  const key = fromLayer.startsWith('transports/') && fromLayer !== 'transports/shared' ? 'transport' : fromLayer;
  const allowed = MAY_IMPORT[key];
  if (!allowed) return `${fromLayer} is not a layer of DESIGN.md §2`;
  if (allowed.includes(to)) return undefined;
  if (key === 'transport' && to.startsWith('transports/'))
    return 'sibling transports never import each other (what two share lives in transports/shared)';
  return `${fromLayer} imports only ${[...allowed, 'shared'].join(', ')}`;
}

export function checkTree(root) {
  const srcDir = join(root, 'src');
  const files = walk(srcDir);
  const violations = [];
  const graph = new Map(); // file → [{target, kind}]
  for (const file of files) {
    const rel = relative(srcDir, file).split(sep).join('/');
    const fromLayer = layerOf(rel);
    const edges = [];
    for (const imp of extractImports(readFileSync(file, 'utf8'))) {
      let to;
      let target;
      if (imp.spec.startsWith('.')) {
        target = resolveRelative(srcDir, file, imp.spec);
        const trel = relative(srcDir, target).split(sep).join('/');
        to = trel.startsWith('..') ? 'outside' : layerOf(trel);
        edges.push({ target, kind: imp.kind });
      } else {
        to = `pkg:${packageName(imp.spec)}`;
        edges.push({ target: to, kind: imp.kind });
      }
      // Static, dynamic and type-only imports alike obey the rules.
      const rule = breaks(fromLayer, rel, to, imp.kind);
      if (rule) violations.push(`src/${rel}:${imp.line} imports ${imp.spec} (${rule})`);
    }
    graph.set(file, edges);
    if (fromLayer === 'core') {
      const text = stripComments(readFileSync(file, 'utf8'));
      const timeRe = /\bDate\.now\s*\(|\bnew\s+Date\s*\(\s*\)/g;
      for (let m; (m = timeRe.exec(text)); ) {
        violations.push(
          `src/${rel}:${lineAt(text, m.index)} reads ${/now/.test(m[0]) ? 'Date.now()' : 'new Date()'} (core ` +
            `reads the time of day only through the Clock port)`,
        );
      }
    }
  }

  // Start path: src/cli.ts and what it loads itself; then static runtime imports only.
  const cli = join(srcDir, 'cli.ts');
  const binEntry = join(root, 'bin', 'sbx.js');
  if (existsSync(cli)) {
    if (existsSync(binEntry) && !/['"]\.\.\/dist\/cli\.js['"]/.test(readFileSync(binEntry, 'utf8'))) {
      violations.push('bin/sbx.js:1 imports something other than ../dist/cli.js (the start path is bin/sbx.js → dist/cli.js)');
    }
    const roots = [cli, ...(graph.get(cli) ?? []).filter((e) => !e.target.startsWith('pkg:') && e.kind !== 'type').map((e) => e.target)];
    const seen = new Map(roots.map((r) => [r, r === cli ? [cli] : [cli, r]]));
    const queue = [...roots];
    while (queue.length) {
      const file = queue.shift();
      for (const e of graph.get(file) ?? []) {
        if (e.kind !== 'static') continue;
        const chain = [...seen.get(file), e.target];
        if (e.target.startsWith('pkg:')) {
          const pkg = e.target.slice(4);
          if (HEAVY.includes(pkg) || HEAVY.some((h) => pkg.startsWith(`${h}/`))) {
            const path = chain
              .slice(0, -1)
              .map((f) => relative(root, f).split(sep).join('/'))
              .join(' → ');
            violations.push(`${path} imports ${pkg} (the CLI start path never statically imports ${HEAVY.join(', ')})`);
          }
        } else if (!seen.has(e.target)) {
          seen.set(e.target, chain);
          queue.push(e.target);
        }
      }
    }
  }
  return [...new Set(violations)];
}

const isMain = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const root = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const violations = checkTree(root);
  for (const v of violations) process.stderr.write(`${v}\n`);
  if (violations.length) {
    process.stderr.write(`check-deps: ${violations.length} violation(s) of the dependency rules (DESIGN.md §2)\n`);
    process.exit(1);
  }
  process.stdout.write('check-deps: ok\n');
}
