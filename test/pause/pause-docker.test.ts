/**
 * Pause and resume on docker (DESIGN.md §16): the engine's pause; a paused container survives a
 * control-plane restart as paused (reconciliation never takes it for stopped).
 */
import { describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { counterPast, pauseContract, readCounter, startCounter } from './pause.contract.js';

describe.skipIf(PROVIDER_SKIP.docker !== undefined)(providerTitle('docker', 'pause and resume on docker'), () => {
  const server = useProviderServer('docker');
  pauseContract(() => server());

  it('the engine reports the container paused', async () => {
    const srv = server();
    const docker = srv.docker!;
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
    const docker = server().docker!;
    const plane = server().restartable();
    try {
      const url = await plane.start();
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
