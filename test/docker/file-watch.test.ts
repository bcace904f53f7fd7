/**
 * File watch on docker (DESIGN §16): the sandbox's sbx-agent watches with inotify inside the
 * container, over its one multiplexed connection — no engine call per event, no polling. The watch
 * contract through a real server, and a sandbox spawned with the agent off answers 501.
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openWatch } from '../helpers/watch.js';
import { watchContract } from '../http/file-watch.contract.js';
import { requireAgentBinary } from './agent-helpers.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('file watch on docker, through sbx-agent'), () => {
  let docker: Docker;
  let srv: TestServer;
  beforeAll(async () => {
    requireAgentBinary();
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker', docker: {} }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (installation) await removeInstallation(docker, installation);
  });

  watchContract(() => ({
    url: srv.url,
    spawn: async () => {
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    },
    count: (id) => srv.plane.deps.files.watcher.count(id),
  }));

  it('an exec’s write reaches the watcher promptly (the event, not a poll)', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const w = await openWatch(srv.url, id, '/w');
    const t0 = performance.now();
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo hi > /w/fast' });
    await w.until((e) => e.some((x) => x.path === '/w/fast' && x.type === 'write'), 5000);
    expect(performance.now() - t0).toBeLessThan(2000);
    w.close();
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('file watch on docker without the agent'), () => {
  let docker: Docker;
  let srv: TestServer;
  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({
      providers: { default: 'docker', docker: { agent: 'off' } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (installation) await removeInstallation(docker, installation);
  });

  it('answers 501 not_implemented (never a poll of the engine)', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const w = await openWatch(srv.url, id, '/');
    expect(w.status).toBe(501);
    expect(w.error?.code).toBe('not_implemented');
  });
});
