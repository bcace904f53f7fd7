import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FirecrackerApi } from '../../src/adapters/providers/firecracker/api-client.js';
import { spawnFirecracker } from '../../src/adapters/providers/firecracker/launcher.js';
import { SbxError } from '../../src/core/errors.js';
import { tempDir } from '../helpers/tmp.js';

/** Stand-in executables for the default launcher: it runs whatever `binary` names with `--api-sock PATH`. */
function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

describe('the default launcher', () => {
  it('runs `<binary> --api-sock <path>` in the sandbox directory, waits for the socket, and kills it', async () => {
    const dir = tempDir('sbx-fc-launch-');
    const js = join(dir, 'vmm.cjs');
    writeFileSync(
      js,
      `const http = require('node:http'); const fs = require('node:fs');
       const [flag, sock] = process.argv.slice(2);
       fs.writeFileSync('argv.json', JSON.stringify({ flag, sock, cwd: process.cwd() }));
       console.log('serial console line');
       setTimeout(() => http.createServer((q, s) => {
         s.writeHead(200, {'content-type': 'application/json'});
         s.end(JSON.stringify({ id: 'x', state: 'Not started', vmm_version: '1', app_name: 'Firecracker' }));
       }).listen(sock), 100);`,
    );
    const binary = script(dir, 'firecracker', `exec ${process.execPath} ${js} "$@"`);
    const apiSocket = join(dir, 'api.sock');
    const vmm = await spawnFirecracker({ binary, apiSocket, cwd: dir, timeoutMs: 5_000 });
    const out: string[] = [];
    vmm.onOutput?.((c) => out.push(c.toString()));
    expect(vmm.alive()).toBe(true);
    expect(await new FirecrackerApi(apiSocket).describe()).toEqual({ state: 'Not started', id: 'x' });
    const seen = JSON.parse((await import('node:fs')).readFileSync(join(dir, 'argv.json'), 'utf8')) as Record<string, string>;
    expect(seen).toEqual({ flag: '--api-sock', sock: apiSocket, cwd: dir });
    vmm.kill('SIGKILL');
    await vmm.exited;
    expect(vmm.alive()).toBe(false);
  });

  it('a binary that exits at once, or never makes its socket, is a typed error within the deadline', async () => {
    const dir = tempDir('sbx-fc-launch-');
    const exits = script(dir, 'exits', 'exit 1');
    const err1 = await spawnFirecracker({ binary: exits, apiSocket: join(dir, 'a.sock'), cwd: dir, timeoutMs: 5_000 }).catch(
      (e: unknown) => e,
    );
    expect(err1).toBeInstanceOf(SbxError);
    expect((err1 as SbxError).message).toMatch(/exited before/);
    const sleeps = script(dir, 'sleeps', 'exec sleep 30');
    const started = Date.now();
    const err2 = await spawnFirecracker({ binary: sleeps, apiSocket: join(dir, 'b.sock'), cwd: dir, timeoutMs: 300 }).catch(
      (e: unknown) => e,
    );
    expect((err2 as SbxError).code).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(3_000);
    const missing = await spawnFirecracker({ binary: join(dir, 'none'), apiSocket: join(dir, 'c.sock'), cwd: dir, timeoutMs: 1_000 }).catch(
      (e: unknown) => e,
    );
    expect((missing as SbxError).code).toBe('provider_error');
    expect(existsSync(join(dir, 'c.sock'))).toBe(false);
  });
});
