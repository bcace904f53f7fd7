import { describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from './engine.js';

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : undefined };
}

/** A control plane on the docker provider with these `providers.docker` settings, torn down with its sandboxes. */
async function withServer(docker: Record<string, unknown>, body: (srv: TestServer) => Promise<void>): Promise<void> {
  await requireEngine();
  const srv = await startTestServer({ providers: { default: 'docker', docker }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
  try {
    await body(srv);
  } finally {
    for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes')).json ?? [])
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
    await srv.close();
  }
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker settings through the HTTP API'), () => {
  for (const [title, settings] of [
    ['user 65534', { user: '65534' }],
    ['user 65534 on a read-only rootfs', { user: '65534', read_only_rootfs: true }],
  ] as const) {
    it(`${title}: files written through the API and by commands land in /workspace, owned by the user`, async () => {
      await withServer(settings, async (srv) => {
        const spawned = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
        expect(spawned.status).toBe(201);
        const base = `/api/v1/sandboxes/${spawned.json.id}`;
        const written = await call(srv.url, 'POST', `${base}/files`, { path: '/workspace/d/e.txt', content: 'hello' });
        expect({ status: written.status, body: written.json }).toEqual({ status: 200, body: { status: 'written' } });
        const exec = await call(srv.url, 'POST', `${base}/exec`, {
          command: 'touch /workspace/x && id -u && pwd && stat -c "%n %u" /workspace /workspace/d/e.txt /workspace/x',
        });
        expect(exec.json).toMatchObject({
          exit_code: 0,
          stdout: '65534\n/workspace\n/workspace 65534\n/workspace/d/e.txt 65534\n/workspace/x 65534\n',
          stderr: '',
        });
        const list = await call(srv.url, 'GET', `${base}/files/list?path=/workspace`);
        expect(list.json.map((f: { name: string; is_dir: boolean }) => [f.name, f.is_dir])).toEqual([
          ['d', true],
          ['x', false],
        ]);
        expect((await call(srv.url, 'GET', `${base}/files?path=/workspace/d/e.txt`)).text).toBe('hello');
      });
    });
  }

  it('an engine without the configured runtime: 500 provider_error naming the setting, not the client', async () => {
    await withServer({ runtime: 'sbx-no-such-runtime' }, async (srv) => {
      const r = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect({ status: r.status, body: r.json }).toEqual({
        status: 500,
        body: {
          code: 'provider_error',
          message: `spawn ${TEST_IMAGE}: the docker engine has no runtime "sbx-no-such-runtime" (providers.docker.runtime)`,
        },
      });
    });
  });

  it('a network that does not exist: 500 provider_error naming the network', async () => {
    await withServer({ network_mode: 'sbx-no-such-network' }, async (srv) => {
      const r = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect({ status: r.status, body: r.json }).toEqual({
        status: 500,
        body: {
          code: 'provider_error',
          message: `spawn ${TEST_IMAGE}: network "sbx-no-such-network" (providers.docker.network_mode) does not exist on the docker engine`,
        },
      });
    });
  });

  it('an invalid image reference: 400 bad_request', async () => {
    await withServer({}, async (srv) => {
      const r = await call(srv.url, 'POST', '/api/v1/sandboxes', { image: 'UPPER/Bad::x' });
      expect({ status: r.status, body: r.json }).toEqual({
        status: 400,
        body: {
          code: 'bad_request',
          message: 'invalid image reference "UPPER/Bad::x": expected [registry/]name[:tag][@digest] with a lowercase name',
        },
      });
      expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).json).toEqual([]);
    });
  });
});
