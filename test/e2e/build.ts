/** Builds dist/ once when it is missing (CI runs `npm run build` first; a fresh checkout may not). */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'sbx.js');

export function ensureBuilt(): void {
  if (existsSync(join(ROOT, 'dist', 'cli.js'))) return;
  try {
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
      cwd: ROOT,
      stdio: 'pipe',
    });
  } catch {
    // Type errors elsewhere still emit JavaScript; the tests below fail clearly if the CLI is missing.
  }
}
