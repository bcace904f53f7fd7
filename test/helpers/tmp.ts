/**
 * Temp directories that a test file leaves nothing of: each `tempDir()` is removed, with all it
 * holds, after the test file that made it has run (vitest evaluates this module once per test file,
 * so the hook below joins that file's root suite, after its own afterAll hooks).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

/** A new directory under os.tmpdir() named `<prefix>XXXXXX`, removed after this test file. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every directory `tempDir()` made so far (also run after the test file). */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

afterAll(removeTempDirs);
