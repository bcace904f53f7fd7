#!/usr/bin/env node
// Bundles the CLI (src/cli.ts) into dist/cli.js plus shared chunks in dist/chunks/, replacing the
// tsc output of that one file: `sbx exec` then loads a handful of files instead of about a hundred,
// which is most of its start-up (issue 33, DESIGN.md §11). Packages stay external (loaded from
// node_modules as before, so native modules and their own files work), and every import() boundary
// of the sources stays a boundary (code splitting), so `sbx serve` still loads the server stack only
// when it runs. Shared modules are one chunk each, so a class is one class on both sides of an
// import(). The rest of dist/ (tsc's tree) stays for the package's library entry points.
// A second bundle, dist/cli-exec.cjs, is the fast path of `sbx exec` (src/transports/cli/fast-exec.ts):
// one CommonJS file with no chunks, so bin/sbx.js loads it without starting the ES module loader (with
// V8's code cache of an earlier run, dist/cli-exec.cjs.cache, which bin/sbx.js writes).
import { mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
// Built in a staging directory and moved in by rename: tests may run a build while others start sbx.
const stage = join(dist, `.cli-build-${process.pid}`);

try {
  await build({
    entryPoints: { cli: join(root, 'src', 'cli.ts') },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    outdir: stage,
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: false,
    legalComments: 'none',
    logLevel: 'warning',
  });
  await build({
    entryPoints: [join(root, 'src', 'transports', 'cli', 'fast-exec.ts')],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    outfile: join(stage, 'cli-exec.cjs'),
    // import() of node:http, yaml… becomes require(): an import() would start the ES module loader
    // after all (every package the client loads lazily has a CommonJS entry).
    supported: { 'dynamic-import': false },
    sourcemap: false,
    legalComments: 'none',
    logLevel: 'warning',
  });
  mkdirSync(join(dist, 'chunks'), { recursive: true });
  // Chunks first (content-hashed names: an old entry keeps finding its own), then the entry.
  for (const name of readdirSync(join(stage, 'chunks'))) renameSync(join(stage, 'chunks', name), join(dist, 'chunks', name));
  renameSync(join(stage, 'cli-exec.cjs'), join(dist, 'cli-exec.cjs'));
  // The V8 code cache bin/sbx.js keeps of the old bundle (its header would not match the new one anyway).
  rmSync(join(dist, 'cli-exec.cjs.cache'), { force: true });
  renameSync(join(stage, 'cli.js'), join(dist, 'cli.js'));
} finally {
  rmSync(stage, { recursive: true, force: true });
}
