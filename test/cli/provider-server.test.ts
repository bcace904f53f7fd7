/**
 * `sbx provider-server`: the reference backend as an operator runs it — it refuses to start
 * without a key file, serves the contract with the key, refuses requests without it, and stops on
 * the signal. A custom-http client drives a sandbox through it.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCustomHttpProvider } from '../../src/adapters/providers/custom-http/index.js';
import { parseListen } from '../../src/transports/cli/commands/provider-server.js';
import { collect, never, sh } from '../contract/provider-contract-helpers.js';
import { tempDir } from '../helpers/tmp.js';
import { runSbx } from './run-sbx.js';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe('sbx provider-server', () => {
  it('parses --listen', () => {
    expect(parseListen('0.0.0.0:7424')).toEqual({ host: '0.0.0.0', port: 7424 });
    expect(parseListen(':80')).toEqual({ host: '127.0.0.1', port: 80 });
    expect(parseListen('[::1]:9')).toEqual({ host: '::1', port: 9 });
    expect(() => parseListen('nope')).toThrow('--listen must be host:port');
  });

  it('needs --api-key-file (usage error) and a readable, non-empty key', async () => {
    const dir = tempDir('sbx-ps-bad-');
    expect((await runSbx(['provider-server'], { cwd: dir, env: { HOME: dir } })).code).toBe(2);
    const r = await runSbx(['provider-server', '--api-key-file', join(dir, 'none')], { cwd: dir, env: { HOME: dir } });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/does not exist/);
  });

  it('serves the contract on mock with the key, refuses without it, and stops on the signal', async () => {
    const dir = tempDir('sbx-ps-');
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, 'ps-test-key-81c4e0d2a9f3\n');
    const config = join(dir, 'sbx.yaml');
    writeFileSync(config, `providers:\n  mock:\n    root_dir: ${join(dir, 'mock')}\nlogging:\n  level: silent\n`);
    const port = await freePort();
    const stop = new AbortController();
    const running = runSbx(
      ['provider-server', '--provider', 'mock', '--listen', `127.0.0.1:${port}`, '--api-key-file', keyFile, '--config', config],
      { cwd: dir, env: { HOME: dir }, signal: stop.signal },
    );
    const url = `http://127.0.0.1:${port}`;
    let status: number | undefined;
    for (let i = 0; i < 100 && status === undefined; i++) {
      status = await fetch(`${url}/health`).then(
        (r) => r.status,
        () => undefined,
      );
      if (status === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(401);
    const p = createCustomHttpProvider({ baseUrl: url, apiKey: 'ps-test-key-81c4e0d2a9f3', timeoutMs: 5_000 });
    try {
      expect((await p.health()).healthy).toBe(true);
      const { runtime_id } = await p.spawn({ sandbox_id: 'sb-ps1', image: 'host', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null });
      expect((await collect(p.exec(runtime_id, sh('echo via-cli'), never))).stdout).toBe('via-cli\n');
      await p.destroy(runtime_id);
      expect(await p.status(runtime_id)).toBe('missing');
    } finally {
      await p.close?.();
    }
    // sbx doctor builds the enabled custom-http provider from the catalogue and asks its health.
    const doctorRow = async (baseUrl: string) => {
      const cfg = join(dir, `doctor-${Math.random().toString(36).slice(2)}.yaml`);
      writeFileSync(
        cfg,
        `providers:\n  custom_http:\n    enabled: true\n    base_url: ${baseUrl}\n    api_key_file: ${keyFile}\n    timeout: 2s\n`,
      );
      const r = await runSbx(['doctor', '--json', '--config', cfg], {
        cwd: dir,
        env: { HOME: dir, SBX_URL: 'http://127.0.0.1:1', PATH: process.env.PATH },
      });
      const checks = (JSON.parse(r.stdout) as { checks: Array<{ title: string; status: string; detail: string }> }).checks;
      return checks.find((c) => c.title === 'other providers')!;
    };
    expect(await doctorRow(url)).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^custom_http healthy/) });
    const down = await doctorRow('http://127.0.0.1:1');
    expect(down).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/^custom_http unhealthy: custom-http health: cannot reach the backend/),
    });
    expect(down.detail).not.toContain('ps-test-key');
    stop.abort();
    expect((await running).code).toBe(0);
  });
});
