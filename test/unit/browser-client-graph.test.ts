/**
 * The dashboard's built modules (dist/ui, from scripts/build-ui.mjs) — the browser entry of the
 * typed client and everything it imports — must load in a browser: every static import relative
 * and present, no `node:` builtin, no undici, eventsource or ws (nor any other package) at module
 * top level. Node-only paths may `import()` their package when called; those are listed.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const UI = join(ROOT, 'dist', 'ui');

/** `import()` calls allowed, by module: the Node-only transport, event and WebSocket paths. */
const DYNAMIC_OK: Record<string, string[]> = {
  'js/client/undici-transport.js': ['undici'],
  'js/client/node-transport.js': ['node:http', 'node:https'],
  'js/client/events.js': ['eventsource'],
  'js/client/exec-ws.js': ['ws'],
};

/** Problems of a directory of browser ES modules, one line each (empty: loadable in a browser). */
function scanBrowserModules(dir: string): string[] {
  const problems: string[] = [];
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
  for (const name of files) {
    const rel = name.split(sep).join('/');
    const file = join(dir, name);
    const text = readFileSync(file, 'utf8');
    const statics = /^\s*(?:import\s*['"]([^'"]+)['"]|(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"])/gm;
    for (let m = statics.exec(text); m; m = statics.exec(text)) {
      const spec = (m[1] ?? m[2])!;
      if (!spec.startsWith('./') && !spec.startsWith('../')) problems.push(`${rel} imports "${spec}" at top level`);
      else if (!existsSync(resolve(dirname(file), spec)) || relative(dir, resolve(dirname(file), spec)).startsWith('..'))
        problems.push(`${rel} imports ${spec}, which is not in ${dir}`);
    }
    const dynamic = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;
    for (let m = dynamic.exec(text); m; m = dynamic.exec(text)) {
      if (!(DYNAMIC_OK[rel] ?? []).includes(m[1]!)) problems.push(`${rel} calls import("${m[1]}")`);
    }
    if (/\brequire\(/.test(text)) problems.push(`${rel} calls require()`);
  }
  return problems;
}

describe('browser module graph of the typed client', () => {
  it('dist/ui holds the browser entry and imports nothing a browser cannot load', () => {
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-ui.mjs')], { stdio: 'inherit' });
    for (const f of ['app.js', 'js/client/browser.js', 'js/client/fetch-transport.js', 'js/client/client.js', 'js/contracts/errors.js']) {
      expect(existsSync(join(UI, f)), f).toBe(true);
    }
    expect(readFileSync(join(UI, 'js', 'transports', 'ui', 'web', 'api.js'), 'utf8')).toContain('../../../client/browser.js');
    expect(scanBrowserModules(UI)).toEqual([]);
  }, 120_000);

  it('the scan reports node: builtins, packages, missing modules and stray import() calls', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-graph-'));
    try {
      mkdirSync(join(dir, 'js', 'client'), { recursive: true });
      writeFileSync(join(dir, 'ok.js'), "import { a } from './js/client/a.js';\nexport const s = 'from here';\n");
      writeFileSync(join(dir, 'js', 'client', 'a.js'), 'export const a = 1;\n');
      writeFileSync(
        join(dir, 'bad.js'),
        "import { readFileSync } from 'node:fs';\nexport { request } from 'undici';\nimport " +
          "'./gone.js';\nconst es = await import('eventsource');\n",
      );
      expect(scanBrowserModules(dir)).toEqual([
        'bad.js imports "node:fs" at top level',
        'bad.js imports "undici" at top level',
        `bad.js imports ./gone.js, which is not in ${dir}`,
        'bad.js calls import("eventsource")',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
