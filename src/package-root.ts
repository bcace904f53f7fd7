import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'sbx-cli';
let cached: { root: string; version: string } | undefined;

/**
 * The sbx-cli package: its root directory and version, found by walking up from this module to the
 * package.json named sbx-cli. The same answer from the sources (tests), the tsc tree (dist/…) and
 * the bundled CLI's chunks (dist/chunks/…), so nothing depends on how deep a module sits.
 */
export function sbxPackage(): { root: string; version: string } {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === PACKAGE_NAME) return (cached = { root: dir, version: String(pkg.version) });
    } catch {
      /* no package.json here: keep walking */
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`sbx: cannot find the ${PACKAGE_NAME} package.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}
