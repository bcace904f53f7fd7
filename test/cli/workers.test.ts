/**
 * `sbx workers` (list, get, drain, delete) and `sbx worker token mint|inspect|verify`, run in
 * process with a fake context against a real test server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerTokenCommand } from '../../src/transports/cli/commands/worker-token.js';
import { workersCommand } from '../../src/transports/cli/commands/workers.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import type { CommandSpec } from '../../src/transports/cli/spec.js';
import { fakeCli } from '../helpers/cli-context.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const sub = (parent: CommandSpec, name: string) => parent.subcommands!.find((c) => c.name === name)!;
const KEY = 'k'.repeat(40);

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => {
  await srv.close();
});

describe('sbx workers', () => {
  it('lists, shows, refuses to drain local or an unknown worker, deletes', async () => {
    await srv.plane.deps.workers.heartbeat('w9', { hostname: 'box9', status: 'online', providers: ['mock'], capacity: { rpc_url: 'http://10.0.0.9:7430' } });
    const ls = fakeCli({ url: srv.url });
    expect(await runCommand(workersCommand, ls.ctx, {})).toBe(0);
    expect(ls.stdout()).toMatch(/^ID\s+STATUS\s+HOSTNAME\s+PROVIDERS\s+RPC URL\s+HEARTBEAT\n/);
    expect(ls.stdout()).toMatch(/w9\s+online\s+box9\s+mock\s+http:\/\/10\.0\.0\.9:7430/);
    const get = fakeCli({ url: srv.url, json: true });
    expect(await runCommand(sub(workersCommand, 'get'), get.ctx, { id: 'w9' })).toBe(0);
    expect(JSON.parse(get.stdout())).toMatchObject({ id: 'w9', hostname: 'box9', capacity: { rpc_url: 'http://10.0.0.9:7430' } });
    const local = fakeCli({ url: srv.url });
    expect(await runCommand(sub(workersCommand, 'drain'), local.ctx, { id: 'local' })).not.toBe(0);
    expect(local.stderr()).toBe('sbx: the local worker cannot be drained; stop sbx serve instead\n');
    const unknown = fakeCli({ url: srv.url });
    expect(await runCommand(sub(workersCommand, 'drain'), unknown.ctx, { id: 'nope' })).toBe(4);
    const del = fakeCli({ url: srv.url });
    expect(await runCommand(sub(workersCommand, 'delete'), del.ctx, { id: 'w9' })).toBe(0);
    expect(del.stdout()).toBe('deleted worker w9\n');
    expect(await runCommand(sub(workersCommand, 'get'), fakeCli({ url: srv.url }).ctx, { id: 'w9' })).toBe(4);
    for (const c of [ls, get, local, unknown, del]) await c.close();
  });
});

describe('sbx worker token', () => {
  const env = { SBX_WORKER_SIGNING_KEY: KEY };
  const run = async (name: string, opts: Record<string, unknown>, extraEnv: Record<string, string> = env) => {
    const cli = fakeCli({ url: 'http://127.0.0.1:9' });
    (cli.ctx as { env: Record<string, string> }).env = extraEnv;
    const code = await runCommand(sub(workerTokenCommand, name), cli.ctx, opts);
    return { code, stdout: cli.stdout(), stderr: cli.stderr() };
  };

  it('mint → inspect → verify; a wrong key, audience or worker fails with exit 1', async () => {
    const minted = await run('mint', { workerId: 'w1', audience: 'worker:rpc', ttl: '2m' });
    expect(minted.code).toBe(0);
    const token = minted.stdout.trim();
    expect(token).toMatch(/^svc-worker-v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    const shown = await run('inspect', { token });
    expect(shown.stdout).toMatch(/worker_id:\s+w1/);
    expect(shown.stdout).toMatch(/audience:\s+worker:rpc/);
    expect(shown.stdout).not.toContain(token.split('.')[2]!);
    expect((await run('verify', { token, workerId: 'w1', audience: 'worker:rpc' })).stdout).toMatch(/^valid: worker w1/);
    expect((await run('verify', { token, workerId: 'w1', audience: 'worker:control-plane' })).code).toBe(1);
    expect((await run('verify', { token, workerId: 'w2', audience: 'worker:rpc' })).code).toBe(1);
    const wrong = await run('verify', { token, workerId: 'w1', audience: 'worker:rpc' }, { SBX_WORKER_SIGNING_KEY: 'x'.repeat(40) });
    expect(wrong).toMatchObject({ code: 1, stderr: 'sbx: invalid: worker token signature is invalid\n' });
    expect((await run('mint', { workerId: 'w1', audience: 'worker:rpc', ttl: '16m' })).code).toBe(2);
    expect((await run('inspect', { token: 'garbage' })).code).toBe(1);
  });
});
