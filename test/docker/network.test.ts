/**
 * Network per spawn and template (DESIGN.md §10): `none` or `bridge` on docker, shown on the
 * sandbox; a `none` sandbox really has no route to the bridge gateway while a `bridge` one reaches
 * a server there; `filtered` is accepted (egress.test.ts tests it). proot and mock share the host's
 * network: asking them for one is 501.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const exec = async (base: string, id: string, command: string) =>
  (await call(base, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '20s' })).body as {
    exit_code: number;
    stdout: string;
    stderr: string;
  };

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('network per spawn on docker'), () => {
  let docker: Docker;
  let srv: TestServer;
  let web: Server;
  let port: number;

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    // Something to reach on the host, at the bridge gateway.
    web = createServer((_req, res) => res.end('reached'));
    await new Promise<void>((r) => web.listen(0, '0.0.0.0', r));
    port = (web.address() as AddressInfo).port;
  }, 60_000);

  afterAll(async () => {
    web?.close();
    const installation = srv?.plane.installationId;
    // Sandboxes first: the filtered network and its host rules go only when none is attached.
    if (docker && installation) await removeInstallation(docker, installation);
    await srv?.close();
  });

  it('bridge reaches the gateway; none has no route at all; each shows its network', async () => {
    const bridge = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'bridge' });
    const none = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'none' });
    expect([bridge.status, none.status]).toEqual([201, 201]);
    expect(bridge.body.network).toBe('bridge');
    expect(none.body.network).toBe('none');
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${none.body.id}`)).body.network).toBe('none');

    const gw = (await exec(srv.url, bridge.body.id, "ip route | awk '/^default/ {print $3}'")).stdout.trim();
    expect(gw).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // busybox nc (its static wget resolves names through NSS and may crash); an HTTP/1.0 request.
    const get = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 ${gw} ${port}`;
    const ok = await exec(srv.url, bridge.body.id, get);
    expect(ok.exit_code).toBe(0);
    expect(ok.stdout).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*reached$/);

    expect((await exec(srv.url, none.body.id, 'ip route')).stdout.trim()).toBe('');
    const cut = await exec(srv.url, none.body.id, get);
    expect(cut.exit_code).not.toBe(0);
    expect(cut.stdout).toBe('');
    // Only the loopback interface.
    expect((await exec(srv.url, none.body.id, "ip -o link | awk -F': ' '{print $2}'")).stdout.trim()).toBe('lo');
  });

  it('a template carries its network to its spawns; a spawn field overrides it', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 'offline', network: 'none' })).body.network).toBe('none');
    const t = await call(srv.url, 'POST', '/api/v1/templates/offline/spawn', {});
    expect(t.status).toBe(201);
    expect(t.body.network).toBe('none');
    const over = await call(srv.url, 'POST', '/api/v1/templates/offline/spawn', { network: 'bridge' });
    expect(over.body.network).toBe('bridge');
    const inspect = await docker.getContainer(`sbx-${t.body.id}`).inspect();
    expect(inspect.HostConfig.NetworkMode).toBe('none');
  });

  it('unset, the sandbox gets providers.docker.network_mode and says so; defaults.network comes first', async () => {
    const plain = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(plain.body.network).toBe('bridge');
    const offline = await startTestServer({
      providers: { default: 'docker' },
      defaults: { image: TEST_IMAGE, memory_mb: 64, network: 'none' },
    });
    try {
      const d = await call(offline.url, 'POST', '/api/v1/sandboxes', {});
      expect(d.body.network).toBe('none');
      expect((await docker.getContainer(`sbx-${d.body.id}`).inspect()).HostConfig.NetworkMode).toBe('none');
      // The spawn's own field still wins over the default.
      expect((await call(offline.url, 'POST', '/api/v1/sandboxes', { network: 'bridge' })).body.network).toBe('bridge');
    } finally {
      await offline.close();
      await removeInstallation(docker, offline.plane.installationId);
    }
  });

  it('mock shares the host network: asking it for one is 501 and creates nothing; without one it shows host', async () => {
    const mock = await startTestServer();
    try {
      for (const network of ['none', 'bridge']) {
        const r = await call(mock.url, 'POST', '/api/v1/sandboxes', { network });
        expect(r.status).toBe(501);
        expect(r.body).toEqual({
          code: 'not_implemented',
          message: `mock sandboxes share the host's network: network "${network}" needs the docker provider`,
        });
      }
      expect((await call(mock.url, 'GET', '/api/v1/sandboxes')).body).toEqual([]);
      expect((await call(mock.url, 'POST', '/api/v1/sandboxes', {})).body.network).toBe('host');
    } finally {
      await mock.close();
    }
  });

  it('filtered runs as root on a local engine (else 501 with the reason); anything else is a 400', async () => {
    // test/docker/egress.test.ts covers what filtered lets through.
    const filtered = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' });
    if (process.getuid?.() === 0) {
      expect(filtered.status, filtered.text).toBe(201);
      expect(filtered.body.network).toBe('filtered');
      expect(filtered.body.egress).toEqual({ allow: [], deny: [] });
    } else {
      expect(filtered.status).toBe(501);
      expect(filtered.body.message).toMatch(/root/);
    }
    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 'f', network: 'filtered' })).status).toBe(201);
    const bad = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'host' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad_request');
  });
});
