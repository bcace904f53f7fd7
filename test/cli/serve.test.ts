import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSbx } from './run-sbx.js';
import { tempDir } from '../helpers/tmp.js';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe('sbx serve / worker', () => {
  it('serve starts the control plane with --port and --config, answers, and stops on the signal', async () => {
    const dir = tempDir('sbx-cli-serve-');
    const config = join(dir, 'server.yaml');
    writeFileSync(
      config,
      `database:\n  driver: sqlite\n  path: ${join(dir, 'sbx.db')}\nproviders:\n  default: mock\n  mock:\n    ` +
        `root_dir: ${join(dir, 'mock')}\nlogging:\n  level: silent\n`,
    );
    const port = await freePort();
    const stop = new AbortController();
    const running = runSbx(['serve', '--port', String(port), '--host', '127.0.0.1', '--config', config], {
      cwd: dir,
      env: { HOME: dir },
      signal: stop.signal,
    });
    const url = `http://127.0.0.1:${port}`;
    let live: { status?: string } | undefined;
    for (let i = 0; i < 100 && !live; i++) {
      live = await fetch(`${url}/api/v1/live`).then(
        (r) => r.json() as Promise<{ status?: string }>,
        () => undefined,
      );
      if (!live) await new Promise((r) => setTimeout(r, 100));
    }
    expect(live?.status).toBe('alive');
    const id = (await runSbx(['spawn'], { env: { SBX_URL: url } })).stdout.trim();
    expect((await runSbx(['exec', id, '--', 'echo', 'served'], { env: { SBX_URL: url } })).stdout).toBe('served\n');
    stop.abort();
    const r = await running;
    expect(r.code).toBe(0);
  });

  it('serve exits 3 on a broken config', async () => {
    const dir = tempDir('sbx-cli-serve-bad-');
    writeFileSync(join(dir, 'bad.yaml'), 'server:\n  port: -4\n');
    const r = await runSbx(['serve', '--config', join(dir, 'bad.yaml')], { cwd: dir, env: { HOME: dir } });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^sbx: invalid configuration[\s\S]*server\.port/);
  });
});
