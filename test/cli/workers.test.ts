/**
 * `sbx workers` (list, get, drain, delete), run in process against a real test server, both through
 * the command handlers with a fake context and through `main(argv)` for the compatibility forms.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { workersCommand } from '../../src/transports/cli/commands/workers.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import type { CommandSpec } from '../../src/transports/cli/spec.js';
import { fakeCli } from '../helpers/cli-context.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';
import { emptyHome, runSbx } from './run-sbx.js';

const sub = (parent: CommandSpec, name: string) => parent.subcommands!.find((c) => c.name === name)!;

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => {
  await srv.close();
});

describe('sbx workers', () => {
  it('lists, shows, refuses to drain local or an unknown worker, deletes', async () => {
    await srv.plane.deps.workers.heartbeat('w9', {
      hostname: 'box9',
      status: 'online',
      providers: ['mock'],
      capacity: { rpc_url: 'http://10.0.0.9:7430' },
    });
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

describe('sbx workers drain of a real remote worker, and the compatibility forms through main()', () => {
  const TOKEN = 'shared-worker-token-7c1e3a5b9d2f4e6a8c0b';
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-workers-cli-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
    worker = await startTestWorker(dir, { id: 'w1', controlPlane: cp.url, auth: { worker_token: TOKEN } });
  });
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sbx workers / sbx workers ID / list --json; drain → draining; an unreachable worker → exit 6', async () => {
    const env = { HOME: emptyHome, SBX_URL: cp.url };
    const ls = await runSbx(['workers'], { env });
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(new RegExp(`\\nw1\\s+online\\s+\\S+\\s+mock\\s+${worker.rpcUrl!.replace(/\./g, '\\.')}\\s`));
    const json = await runSbx(['workers', 'list', '--json'], { env });
    expect(JSON.parse(json.stdout)).toEqual([expect.objectContaining({ id: 'w1', status: 'online', providers: ['mock'] })]);
    const one = await runSbx(['workers', 'w1'], { env });
    expect(one.stdout).toMatch(/id:\s+w1\n/);
    expect(one.stdout).toContain(`rpc url:        ${worker.rpcUrl}`);

    const drained = await runSbx(['workers', 'drain', 'w1'], { env });
    expect(drained).toMatchObject({ code: 0, stderr: '' });
    expect(drained.stdout).toBe('worker w1 is draining: no new sandboxes go to it; its running sandboxes keep answering\n');
    expect(JSON.parse((await runSbx(['workers', 'get', 'w1', '--json'], { env })).stdout)).toMatchObject({ id: 'w1', status: 'draining' });
    const spawn = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '1m' });
    expect(spawn.status).toBe(503);

    await cp.plane.deps.workers.heartbeat('w-gone', {
      hostname: 'gone',
      status: 'online',
      providers: ['mock'],
      capacity: { rpc_url: 'http://127.0.0.1:9' },
    });
    const gone = await runSbx(['workers', 'drain', 'w-gone'], { env });
    expect(gone.code).toBe(6);
    expect(gone.stdout).toBe('');
    expect(await runSbx(['workers', 'get', 'nope'], { env })).toMatchObject({ code: 4 });
  });
});
