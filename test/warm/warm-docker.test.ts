/** Warm pools on docker: a claimed container runs the spawn's commands; a restart adopts the ready ones. */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { RestartablePlane } from '../processes/helpers.js';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('warm pools on docker'), () => {
  let docker: Docker;
  const plane = new RestartablePlane(() => ({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64, warm: 2 } }));
  let installation = '';

  beforeAll(async () => {
    docker = await requireEngine();
  });
  afterAll(async () => {
    await plane.remove();
    if (installation) await removeInstallation(docker, installation);
  });

  const ready = async (url: string, n: number) => {
    const end = Date.now() + 60_000;
    while (Date.now() < end) {
      const w = (await call(url, 'GET', '/api/v1/diagnostics')).body.warm as Array<{ ready: number }>;
      if (w[0]?.ready === n) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`warm pool never reached ${n}`);
  };

  it('spawns claim ready containers, and a restart adopts the others without leaking any', async () => {
    let url = await plane.start();
    installation = plane.plane!.installationId;
    await ready(url, 2);
    const warmIds = (await plane.plane!.deps.store.listWarm()).map((w) => w.sandbox_id);
    const sb = await call(url, 'POST', '/api/v1/sandboxes', {});
    expect(sb.status).toBe(201);
    expect(warmIds).toContain(sb.body.id);
    const ex = await call(url, 'POST', `/api/v1/sandboxes/${sb.body.id}/exec`, { command: 'echo from-warm; id -u' });
    expect(ex.body).toMatchObject({ exit_code: 0, stdout: expect.stringMatching(/^from-warm\n/) });
    await ready(url, 2);
    const before = (await plane.plane!.deps.store.listWarm()).map((w) => w.runtime_id).sort();
    await plane.stop();
    url = await plane.start();
    await ready(url, 2);
    expect((await plane.plane!.deps.store.listWarm()).map((w) => w.runtime_id).sort()).toEqual(before);
    const containers = await docker.listContainers({ all: true, filters: { label: [`sbx.installation_id=${installation}`] } });
    // The live sandbox and the two warm ones: nothing else.
    expect(containers.length).toBe(3);
  }, 120_000);
});
