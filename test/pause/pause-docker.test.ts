/**
 * Pause and resume on docker (DESIGN.md §16): the engine's pause; a paused container survives a
 * control-plane restart as paused (reconciliation never takes it for stopped).
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { RestartablePlane } from '../processes/helpers.js';
import { counterPast, pauseContract, readCounter, startCounter } from './pause.contract.js';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('pause and resume on docker'), () => {
  let docker: Docker;
  let srv: TestServer;
  const installations: string[] = [];

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    installations.push(srv.plane.installationId);
  }, 60_000);

  afterAll(async () => {
    await srv?.close();
    for (const i of installations) await removeInstallation(docker, i);
  });

  pauseContract(() => ({ url: srv.url, spawn: async () => (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string }));

  it('the engine reports the container paused', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/pause`);
    const rec = await srv.plane.deps.store.getSandbox(id);
    const info = await docker.getContainer(rec!.runtime_id!).inspect();
    expect(info.State.Paused).toBe(true);
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/resume`);
    expect((await docker.getContainer(rec!.runtime_id!).inspect()).State.Paused).toBe(false);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
  }, 60_000);

  it('a paused sandbox survives a control-plane restart as paused, and resumes with its processes', async () => {
    const plane = new RestartablePlane(() => ({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } }));
    try {
      const url = await plane.start();
      installations.push(plane.plane!.installationId);
      const id = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
      await startCounter({ url, spawn: async () => id }, id);
      const before = await readCounter({ url, spawn: async () => id }, id);
      expect((await call(url, 'POST', `/api/v1/sandboxes/${id}/pause`)).body.state).toBe('paused');
      await plane.stop();
      const again = await plane.start();
      expect((await call(again, 'GET', `/api/v1/sandboxes/${id}`)).body.state).toBe('paused');
      const rec = await plane.plane!.deps.store.getSandbox(id);
      expect((await docker.getContainer(rec!.runtime_id!).inspect()).State.Paused).toBe(true);
      expect((await call(again, 'POST', `/api/v1/sandboxes/${id}/resume`)).body.state).toBe('running');
      const t = { url: again, spawn: async () => id };
      const after = await readCounter(t, id);
      // A restart takes seconds (30+ steps of the counter): frozen, it moved only around the pause call.
      expect(after - before).toBeLessThanOrEqual(10);
      // And it counts on.
      expect((await counterPast(t, id, after, 4)) - after).toBeGreaterThanOrEqual(4);
    } finally {
      await plane.remove();
    }
  }, 120_000);
});
