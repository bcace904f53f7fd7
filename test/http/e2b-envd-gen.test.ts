import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The envd plane's TypeScript (src/transports/e2b/envd/gen) is generated from the project's own
 * .proto files by buf and protoc-gen-es (`npm run gen:envd`) and checked in. This drift test
 * regenerates into a temporary directory and compares, so a .proto edited without regenerating
 * (or generated code edited by hand) fails here. Integration tier: it spawns buf.
 */
const ROOT = join(import.meta.dirname, '../..');
const ENVD = join(ROOT, 'src/transports/e2b/envd');

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('envd generated code', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'sbx-envd-gen-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('matches what buf generates from the .proto files', () => {
    cpSync(join(ENVD, 'proto'), join(tmp, 'proto'), { recursive: true });
    execFileSync(join(ROOT, 'node_modules/.bin/buf'), ['generate'], {
      cwd: join(tmp, 'proto'),
      env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}` },
      stdio: 'pipe',
      timeout: 120_000,
    });
    const want = files(join(ENVD, 'gen'));
    expect(files(join(tmp, 'gen'))).toEqual(want);
    expect(want).toEqual(['filesystem/filesystem_pb.ts', 'process/process_pb.ts']);
    for (const f of want) expect(readFileSync(join(tmp, 'gen', f), 'utf8'), f).toBe(readFileSync(join(ENVD, 'gen', f), 'utf8'));
  }, 150_000);
});
