import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { ConfigError } from '../../src/config/index.js';

/** Real temp directories for config tests: `home` (with .sbx/) and `cwd` two levels below `root`. */
export const dirs = { root: '', home: '', cwd: '' };

/** Registers per-test temp dirs, removed afterwards. */
export function useConfigDirs(): void {
  beforeEach(() => {
    dirs.root = mkdtempSync(join(tmpdir(), 'sbx-config-'));
    dirs.home = join(dirs.root, 'home');
    dirs.cwd = join(dirs.root, 'work', 'project');
    mkdirSync(join(dirs.home, '.sbx'), { recursive: true });
    mkdirSync(dirs.cwd, { recursive: true });
  });
  afterEach(() => rmSync(dirs.root, { recursive: true, force: true }));
}

export function write(path: string, text: string): string {
  writeFileSync(path, text);
  return path;
}

/** The problems of a load that must fail with ConfigError. */
export async function problemsOf(p: Promise<unknown>): Promise<string[]> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).problems;
}
