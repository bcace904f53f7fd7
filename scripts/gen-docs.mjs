#!/usr/bin/env node
// Regenerates completions/ and man/sbx.1 from the command tree in dist/ (run `npm run build` first).
// `--check` writes nothing and exits 1 when a checked-in file differs from the tree.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
if (!existsSync(join(dist, 'cli.js'))) {
  process.stderr.write('gen-docs: dist/ is missing; run `npm run build` first\n');
  process.exit(1);
}
const { docFiles } = await import(join(dist, 'transports/cli/docs/files.js'));

const check = process.argv.includes('--check');
let drift = 0;
for (const [rel, content] of Object.entries(docFiles())) {
  const path = join(root, rel);
  const current = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
  if (current === content) continue;
  if (check) {
    process.stderr.write(`gen-docs: ${rel} is out of date; run \`npm run gen:docs\`\n`);
    drift++;
    continue;
  }
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  process.stdout.write(`wrote ${rel}\n`);
}
process.exitCode = drift > 0 ? 1 : 0;
