import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { DOCKER_SKIP, dockerTitle, EngineTap, requireEngine, TEST_IMAGE } from './engine.js';

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('the control plane on the docker provider'), () => {
  let docker: Docker;
  let dir: string;
  // Closing the relay is, to sbx, the engine going away mid-run (the daemon stays up for the other suites).
  let relay: EngineTap;
  let srv: TestServer | undefined;

  const start = () =>
    startTestServer({
      providers: { default: 'docker', docker: { socket_path: relay.path } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
      database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    });

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-docker-cp-'));
    relay = new EngineTap(dir);
    await relay.open();
  });
  afterAll(async () => {
    await relay.open().catch(() => undefined);
    if (srv) {
      // Destroy what is left through the API so this suite leaves no container behind.
      const list = await call(srv.url, 'GET', '/api/v1/sandboxes');
      for (const s of list.json ?? []) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
      await srv.close();
    }
    await relay.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('rejects memory and vcpus the host cannot give with 400, creating nothing', async () => {
    srv = await start();
    for (const body of [{ memory_mb: 0 }, { memory_mb: -5 }, { memory_mb: 1_000_000_000 }, { vcpus: 0 }, { vcpus: 100_000 }]) {
      const r = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.code).toBe('bad_request');
    }
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).json).toEqual([]);
  });

  it('an HTTP exec past its timeout answers 408 and leaves nothing running in the container', async () => {
    srv ??= await start();
    const { id } = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).json;
    const nap = `${200 + Math.floor(Math.random() * 100)}`;
    const r = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: `echo go; (sleep ${nap} &); sleep ${nap}`,
      timeout: '1s',
    });
    expect(r.status).toBe(408);
    expect(r.json).toMatchObject({ code: 'timeout', stdout: 'go\n' });
    const ps = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'ps -o args' });
    expect(ps.json.stdout).not.toContain(`sleep ${nap}`);
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
  });

  it('keeps a sandbox working across a control-plane restart, without a respawn', async () => {
    srv ??= await start();
    const spawned = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(spawned.status).toBe(201);
    const id: string = spawned.json.id;
    expect(
      (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/kept.txt', content: 'still here' })).status,
    ).toBe(200);
    const before = await docker.getContainer(`sbx-${id}`).inspect();

    await srv.close();
    srv = await start();

    const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`);
    expect(got.status).toBe(200);
    expect(got.json.state).toBe('running');
    const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'cat /workspace/kept.txt' });
    expect(exec.json).toMatchObject({ exit_code: 0, stdout: 'still here' });
    const after = await docker.getContainer(`sbx-${id}`).inspect();
    expect(after.Id).toBe(before.Id);
    expect(after.State.StartedAt).toBe(before.State.StartedAt);
  });

  it(
    'a container killed from outside: a clear error, then the reaper cleans record and container (never while ' + 'the engine is gone)',
    async () => {
      srv ??= await start();
      const { bus, sandboxes } = srv.plane.deps;
      const { json: sb } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      const id: string = sb.id;
      await docker.getContainer(`sbx-${id}`).kill();

      const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo hi' });
      expect(exec.status).toBe(500);
      expect(exec.json).toEqual({ code: 'provider_error', message: 'exec: sandbox runtime is not running' });
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`)).json.state).toBe('error');
      expect(bus.since(0, { types: ['sandbox.error'], sandbox_id: id })).toHaveLength(1);

      // The engine cannot answer: the reaper cannot tell a dead sandbox from a dead engine, so it waits.
      await relay.close();
      try {
        expect(await sandboxes.reap()).toBe(0);
        expect((await srv.plane.deps.store.getSandbox(id))!.state).toBe('error');
      } finally {
        await relay.open();
      }
      expect((await docker.getContainer(`sbx-${id}`).inspect()).State.Running).toBe(false);

      expect(await sandboxes.reap()).toBe(1);
      expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).json.map((s: { id: string }) => s.id)).not.toContain(id);
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
      expect((await srv.plane.deps.store.getSandbox(id))!.state).toBe('destroyed');
      await expect(docker.getContainer(`sbx-${id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
      expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id })).toEqual([
        expect.objectContaining({ data: { reason: 'runtime_lost' } }),
      ]);
      expect(await sandboxes.reap()).toBe(0);
    },
  );

  it(
    'a container killed from outside with no operation since is found by the reaper (one listing per pass), ' +
      'never while the engine is gone',
    async () => {
      srv ??= await start();
      const { bus, sandboxes, store } = srv.plane.deps;
      const { json: sb } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      const { json: kept } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      await docker.getContainer(`sbx-${sb.id}`).kill();

      await relay.close();
      try {
        expect(await sandboxes.reap()).toBe(0);
        expect((await store.getSandbox(sb.id))!.state).toBe('running');
      } finally {
        await relay.open();
      }

      expect(await sandboxes.reap()).toBe(1);
      expect((await store.getSandbox(sb.id))!.state).toBe('destroyed');
      await expect(docker.getContainer(`sbx-${sb.id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
      expect(bus.since(0, { types: ['sandbox.error', 'sandbox.destroyed'], sandbox_id: sb.id }).map((e) => [e.type, e.data])).toEqual([
        ['sandbox.error', { provider: 'docker', operation: 'reap', reason: 'runtime stopped' }],
        ['sandbox.destroyed', { reason: 'runtime_lost' }],
      ]);
      expect((await store.getSandbox(kept.id))!.state).toBe('running');
      expect((await docker.getContainer(`sbx-${kept.id}`).inspect()).State.Running).toBe(true);
      // A quiet pass over live sandboxes costs one engine call, however many there are.
      const { json: more } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      relay.take();
      expect(await sandboxes.reap()).toBe(0);
      expect(relay.take()).toEqual(['GET /containers/json']);
      for (const id of [kept.id, more.id]) expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    },
  );

  it('a container stopped while the control plane was down is cleaned by startup reconciliation', async () => {
    srv ??= await start();
    const { json: sb } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    const id: string = sb.id;
    const { json: kept } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    await srv.close();
    srv = undefined;
    await docker.getContainer(`sbx-${id}`).kill();

    srv = await start();
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
    expect((await srv.plane.deps.store.getSandbox(id))!.state).toBe('destroyed');
    await expect(docker.getContainer(`sbx-${id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(srv.plane.deps.bus.since(0, { types: ['reconcile.action'], sandbox_id: id })).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ action: 'destroy_stopped', provider: 'docker' }) }),
    ]);
    // The sandbox whose container kept running is untouched.
    const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${kept.id}/exec`, { command: 'echo alive' });
    expect(exec.json).toMatchObject({ exit_code: 0, stdout: 'alive\n' });
  });

  it('answers provider_error while the engine is gone, keeps serving, turns not ready, and recovers', async () => {
    srv ??= await start();
    const { json: sb } = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect((await call(srv.url, 'GET', '/api/v1/ready')).status).toBe(200);

    await relay.close();
    // An exec goes through the container's agent (DESIGN §11), which needs no engine: it still
    // answers. What needs the engine (a listing runs as an engine exec) answers provider_error.
    const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${sb.id}/exec`, { command: 'echo hi' });
    expect(exec.json).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
    const list = await call(srv.url, 'GET', `/api/v1/sandboxes/${sb.id}/files/list?path=/workspace`);
    expect(list.status).toBe(500);
    expect(list.json.code).toBe('provider_error');
    expect(list.json.message).not.toMatch(/ECONNREFUSED|ENOENT|\.sock/);
    const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(spawn.status).toBe(500);
    expect(spawn.json.code).toBe('provider_error');
    expect((await call(srv.url, 'GET', '/api/v1/health')).status).toBe(200);
    // Provider health is cached for two seconds.
    await waitFor('not ready', async () => (await call(srv!.url, 'GET', '/api/v1/ready')).status === 503, 10_000, 200);
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).status).toBe(200);

    await relay.open();
    await waitFor('ready again', async () => (await call(srv!.url, 'GET', '/api/v1/ready')).status === 200, 10_000, 200);
    const again = await call(srv.url, 'POST', `/api/v1/sandboxes/${sb.id}/exec`, { command: 'echo back' });
    expect(again.json).toMatchObject({ exit_code: 0, stdout: 'back\n' });
  });
});
