/**
 * `worker.spawn` with the spec's params only (DESIGN §7): `sandbox_id` and `provider` (with a
 * valid lease) against a real `sbx worker`; everything else comes from the worker's own defaults.
 * On mock the spawn and the runtime are checked; on docker (SBX_TEST_DOCKER=1) the container shows
 * the worker's `defaults.image` and `defaults.memory_mb`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/compose/worker.js';
import { loadConfig } from '../../src/config/index.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const TOKEN = 'spawn-defaults-worker-token-0123456789';
const hdr = (id: string) => ({ 'x-worker-id': id, 'x-worker-token': TOKEN });
const lease = (sandboxId: string, holder: string) => ({
  resource_id: sandboxId,
  holder_id: holder,
  generation: 1,
  expires_at: new Date(Date.now() + 10 * 60_000).toISOString(),
});

async function worker(dir: string, cp: string, id: string, overrides: Record<string, unknown>): Promise<Worker> {
  const { config } = await loadConfig({
    cwd: dir,
    home: dir,
    env: {},
    overrides: {
      ...overrides,
      auth: { worker_token: TOKEN },
      worker: { id, control_plane_url: cp, listen_addr: '127.0.0.1:0', heartbeat_interval: '1s', state_path: join(dir, `${id}.db`) },
      logging: { level: 'silent' },
    } as never,
  });
  const w = await createWorker(config, { home: dir, logger: pino({ level: 'silent' }) });
  await w.start();
  return w;
}

let cp: TestServer;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-spawn-defaults-'));
  cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
});
afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('worker.spawn with only {sandbox_id, provider} (mock)', () => {
  let w: Worker;
  beforeAll(async () => {
    w = await worker(dir, cp.url, 'wd-mock', { providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } } });
  });
  afterAll(async () => w?.stop());

  it('spawns with the worker defaults; the runtime runs commands; no lease is still 400', async () => {
    const rpc = w.rpcUrl!;
    const params = { sandbox_id: 'sb-defaults1', provider: 'mock' };
    const noLease = await call(rpc, 'POST', '/rpc', { id: 'n', method: 'worker.spawn', worker_id: 'wd-mock', params }, hdr('wd-mock'));
    expect(noLease.status).toBe(400);
    expect(noLease.body.error.message).toBe('this method needs a lease');

    const r = await call(
      rpc,
      'POST',
      '/rpc',
      { id: 's', method: 'worker.spawn', worker_id: 'wd-mock', lease: lease('sb-defaults1', 'wd-mock'), params },
      hdr('wd-mock'),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.result).toEqual({
      sandbox_id: 'sb-defaults1',
      runtime_id: 'sb-defaults1',
      state: 'running',
      provider: 'mock',
      worker_id: 'wd-mock',
      network: 'host',
    });
    const target = { sandbox_id: 'sb-defaults1', provider: 'mock', runtime_id: r.body.result.runtime_id };
    const ex = await call(
      rpc,
      'POST',
      '/rpc',
      { id: 'e', method: 'worker.exec', worker_id: 'wd-mock', params: { ...target, command: 'echo ok', args: [], mode: 'shell', env: {} } },
      hdr('wd-mock'),
    );
    expect(Buffer.from(ex.body.result.stdout, 'base64').toString()).toBe('ok\n');
    // Only sandbox_id: the worker's default provider (mock) serves it.
    const bare = await call(
      rpc,
      'POST',
      '/rpc',
      {
        id: 'b',
        method: 'worker.spawn',
        worker_id: 'wd-mock',
        lease: lease('sb-defaults2', 'wd-mock'),
        params: { sandbox_id: 'sb-defaults2' },
      },
      hdr('wd-mock'),
    );
    expect(bare.status).toBe(200);
    expect(bare.body.result).toMatchObject({ sandbox_id: 'sb-defaults2', provider: 'mock', state: 'running' });
    // Wrong types are still refused.
    const bad = await call(
      rpc,
      'POST',
      '/rpc',
      {
        id: 'x',
        method: 'worker.spawn',
        worker_id: 'wd-mock',
        lease: lease('sb-defaults3', 'wd-mock'),
        params: { sandbox_id: 'sb-defaults3', memory_mb: 'lots' },
      },
      hdr('wd-mock'),
    );
    expect(bad.status).toBe(400);
    for (const t of [target, { ...target, sandbox_id: 'sb-defaults2', runtime_id: 'sb-defaults2' }]) {
      const d = await call(
        rpc,
        'POST',
        '/rpc',
        { id: 'd', method: 'worker.destroy', worker_id: 'wd-mock', lease: lease(t.sandbox_id, 'wd-mock'), params: t },
        hdr('wd-mock'),
      );
      expect(d.status).toBe(200);
    }
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('worker.spawn with only {sandbox_id, provider} (docker)'), () => {
  let docker: Docker;
  let w: Worker;
  beforeAll(async () => {
    docker = await requireEngine();
    w = await worker(dir, cp.url, 'wd-docker', {
      providers: { default: 'docker', docker: { socket_path: SOCKET } },
      defaults: { image: TEST_IMAGE, memory_mb: 96, vcpus: 1 },
    });
  }, 60_000);
  afterAll(async () => {
    if (docker && w?.installationId) await removeInstallation(docker, w.installationId);
    await w?.stop();
  }, 60_000);

  it("the container has the worker's defaults.image and defaults.memory_mb", async () => {
    const r = await call(
      w.rpcUrl!,
      'POST',
      '/rpc',
      {
        id: 's',
        method: 'worker.spawn',
        worker_id: 'wd-docker',
        lease: lease('sb-dockerdefaults', 'wd-docker'),
        params: { sandbox_id: 'sb-dockerdefaults', provider: 'docker' },
      },
      hdr('wd-docker'),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const info = await docker.getContainer(r.body.result.runtime_id).inspect();
    // Containers are created from the image id that was checked (the snapshot-image rule, DESIGN §10).
    expect(info.Image).toBe((await docker.getImage(TEST_IMAGE).inspect()).Id);
    expect(info.HostConfig.Memory).toBe(96 * 1024 * 1024);
    expect(info.State.Running).toBe(true);
  }, 60_000);
});
