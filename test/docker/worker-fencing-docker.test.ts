/**
 * A docker `sbx worker` behind a control plane (SBX_TEST_DOCKER=1): it advertises a terminal for
 * its docker provider (`tty:docker`) and the control plane shows it; a stale lease is fenced off a
 * real container (the command never runs), a current one runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/compose/worker.js';
import { loadConfig } from '../../src/config/index.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

const TOKEN = 'docker-fencing-worker-token-0123456789';
const ID = 'wdf';
const hdr = { 'x-worker-id': ID, 'x-worker-token': TOKEN };

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('a docker worker: tty per provider, fencing on a real container'), () => {
  let docker: Docker;
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  const rpcCall = (method: string, params: Record<string, unknown>, lease?: Record<string, unknown>) =>
    call(worker.rpcUrl!, 'POST', '/rpc', { id: 'd', method, worker_id: ID, params, ...(lease ? { lease } : {}) }, hdr);

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-docker-fencing-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
    const { config } = await loadConfig({
      cwd: dir,
      home: dir,
      env: {},
      overrides: {
        providers: { default: 'docker', docker: { socket_path: SOCKET } },
        defaults: { image: TEST_IMAGE, memory_mb: 64 },
        auth: { worker_token: TOKEN },
        worker: { id: ID, control_plane_url: cp.url, listen_addr: '127.0.0.1:0', heartbeat_interval: '1s', state_path: join(dir, 'w.db') },
        logging: { level: 'silent' },
      } as never,
    });
    worker = await createWorker(config, { home: dir, logger: pino({ level: 'silent' }) });
    await worker.start();
  }, 120_000);

  afterAll(async () => {
    const installation = worker?.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('advertises tty:docker; the control plane lists docker with a terminal', async () => {
    const w = await call(cp.url, 'GET', `/api/v1/workers/${ID}`);
    expect(w.body.capabilities).toContain('tty:docker');
    const docker = (await call(cp.url, 'GET', '/api/v1/providers')).body.find((p: { name: string }) => p.name === 'docker');
    expect(docker.capabilities).toContain('tty');
  });

  it('a stale lease never reaches the container; the current one does', async () => {
    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { provider: 'docker', image: TEST_IMAGE, memory_mb: 64, ttl: '5m' });
    expect(sb.status, sb.text).toBe(201);
    const rec = await cp.plane.deps.sandboxes.get(sb.body.id, { owner_id: null, admin: true });
    const t = { sandbox_id: rec.id, provider: 'docker', runtime_id: rec.runtime_id! };
    const lease = (await cp.plane.deps.leases.list()).find((l) => l.resource_id === rec.id)!;
    const newer = { ...lease, generation: lease.generation + 2 };
    expect((await rpcCall('worker.renew_lease', { resource_id: rec.id }, newer)).status).toBe(200);
    const exec = (command: string, l: Record<string, unknown>) =>
      rpcCall('worker.exec', { ...t, command, args: [], mode: 'shell', env: {} }, l);
    expect((await exec('touch /tmp/stale', { ...lease, generation: lease.generation + 1 })).status).toBe(403);
    const ok = await exec('ls /tmp/stale 2>&1; echo done', newer);
    expect(ok.status).toBe(200);
    const out = Buffer.from(ok.body.result.stdout, 'base64').toString();
    expect(out).toContain('No such file');
    expect(out).toContain('done');
    expect((await rpcCall('worker.destroy', t, newer)).status).toBe(200);
  }, 120_000);
});
