#!/usr/bin/env node
// Builds the dashboard (src/transports/ui/web) into dist/ui: app.ts compiled by tsc for the
// browser, index.html, app.css and favicon.svg copied. Run by `npm run build`; no CDN, nothing
// downloaded at run time.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const web = join(root, 'src', 'transports', 'ui', 'web');
const out = join(root, 'dist', 'ui');
mkdirSync(out, { recursive: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(web, 'tsconfig.json')], { stdio: 'inherit' });
for (const f of ['index.html', 'app.css', 'favicon.svg']) copyFileSync(join(web, f), join(out, f));
