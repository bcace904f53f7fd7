#!/usr/bin/env node
// Builds the dashboard (src/transports/ui/web) into dist/ui. tsc compiles app.ts and what it
// imports (the browser entry of the typed client, src/client/browser.ts) for the browser into
// dist/.ui-build; the modules the page loads — app.js's static import graph, nothing else — are
// copied to dist/ui/js/ keeping their paths under src/, and dist/ui/app.js loads the app. Any bare
// import (a package, a node: builtin) in that graph fails the build: the browser could not load it.
// index.html, app.css and favicon.svg are copied. Run by `npm run build`; no CDN, nothing
// downloaded at run time.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const web = join(root, 'src', 'transports', 'ui', 'web');
const out = join(root, 'dist', 'ui');
// One staging directory per run, and files replaced by rename: test files build the dashboard
// concurrently while servers of other tests read dist/ui.
const stage = join(root, 'dist', `.ui-build-${process.pid}`);
const ENTRY = 'transports/ui/web/app.js';

mkdirSync(out, { recursive: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', join(web, 'tsconfig.json'), '--outDir', stage], { stdio: 'inherit' });
  copyGraph();
} finally {
  rmSync(stage, { recursive: true, force: true });
}
for (const f of ['index.html', 'app.css', 'favicon.svg']) put(join(out, f), readFileSync(join(web, f)));

function put(file, data) {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, file);
}

/** Static import and re-export specifiers of a module (dynamic import() is not followed: it runs only when called). */
function staticImports(text) {
  const specs = [];
  const re = /^\s*(?:import\s*['"]([^'"]+)['"]|(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"])/gm;
  for (let m = re.exec(text); m; m = re.exec(text)) specs.push(m[1] ?? m[2]);
  return specs;
}

/** Copies app.js's static module graph from the staging tree to dist/ui/js, and the entry dist/ui/app.js. */
function copyGraph() {
  const seen = new Set();
  const todo = [ENTRY];
  while (todo.length > 0) {
    const rel = todo.pop();
    if (seen.has(rel)) continue;
    seen.add(rel);
    const file = join(stage, rel);
    if (!existsSync(file)) throw new Error(`build-ui: ${rel} is imported but was not compiled`);
    const text = readFileSync(file, 'utf8');
    for (const spec of staticImports(text)) {
      if (!spec.startsWith('./') && !spec.startsWith('../')) {
        throw new Error(
          `build-ui: ${rel} imports "${spec}", which a browser cannot load (the dashboard's modules may import only each other)`,
        );
      }
      const target = relative(stage, resolve(dirname(file), spec))
        .split(sep)
        .join('/');
      if (target.startsWith('..')) throw new Error(`build-ui: ${rel} imports ${spec}, outside the compiled tree`);
      todo.push(target);
    }
    put(join(out, 'js', rel), text);
  }
  put(
    join(out, 'app.js'),
    `// The dashboard's entry; its modules are under js/ (built by scripts/build-ui.mjs).\nimport './js/${ENTRY}';\n`,
  );
  // Modules of an earlier build the page no longer imports.
  for (const name of readdirSync(join(out, 'js'), { recursive: true, encoding: 'utf8' })) {
    const rel = name.split(sep).join('/');
    if (rel.endsWith('.js') && !seen.has(rel)) rmSync(join(out, 'js', name), { force: true });
  }
}
