/**
 * Global setup of the tiers that run the built package (integration, system): `dist/` (tsc),
 * the agent and the dashboard bundle, made once per run — and only when a source is newer than
 * what is built (`npm test` builds first, so there it does nothing). Test files never build.
 * SBX_TEST_SKIP_BUILD=1 skips it (a developer who knows dist/ is current).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

/** Newest modification time under `dir` (files only), 0 when it does not exist. */
function newest(dir: string): number {
  if (!existsSync(dir)) return 0;
  let latest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) latest = Math.max(latest, statSync(join(e.parentPath, e.name)).mtimeMs);
  }
  return latest;
}

/** What a build produces, and when its oldest part was made (0 when a part is missing). */
function builtAt(): number {
  const outputs = [join(ROOT, 'dist', 'cli.js'), join(ROOT, 'dist', 'ui', 'index.html')];
  if (!outputs.every((p) => existsSync(p))) return 0;
  return Math.min(...outputs.map((p) => statSync(p).mtimeMs));
}

/** Set once this process built or found dist/ current: the integration and system projects share one check. */
const CHECKED = Symbol.for('sbx.test.build-checked');

export default function setup(): void {
  if (process.env.SBX_TEST_SKIP_BUILD === '1') return;
  const g = globalThis as { [CHECKED]?: boolean };
  if (g[CHECKED]) return;
  g[CHECKED] = true;
  const sources = Math.max(
    newest(join(ROOT, 'src')),
    newest(join(ROOT, 'agent')),
    ...['tsconfig.build.json', 'scripts/build-ui.mjs', 'scripts/build-agent.mjs'].map((f) => statSync(join(ROOT, f)).mtimeMs),
  );
  if (builtAt() > sources) return;
  process.stderr.write('sbx tests: building dist/, the agent and the dashboard once for this run (npm run build)\n');
  const node = (args: string[]) => execFileSync(process.execPath, args, { cwd: ROOT, stdio: 'inherit' });
  try {
    node([join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json']);
  } catch {
    // Type errors elsewhere still emit JavaScript (typecheck reports them); the tests needing dist/ say what is missing.
  }
  node([join(ROOT, 'scripts', 'build-agent.mjs')]);
  node([join(ROOT, 'scripts', 'build-ui.mjs')]);
}
