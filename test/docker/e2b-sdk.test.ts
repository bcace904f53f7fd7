import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { NotFoundError, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from './engine.js';

const KEY = 'e2b_00112233445566778899aabbccddeeff00112233';

/** E2B's own SDK (DESIGN.md §14) creating and killing real containers through /e2b on the docker provider. */
describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('E2B SDK on the docker provider'), () => {
  let docker: Docker;
  let dir: string;
  let srv: TestServer;
  const requested: string[] = [];
  let sdk: Record<string, unknown>;

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-docker-e2b-'));
    srv = await startTestServer({
      providers: { default: 'docker' },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
      database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    });
    const log = (...a: unknown[]) => {
      const m = /^Request \w+ (\S+)/.exec(a.map(String).join(' '));
      if (m) requested.push(m[1]!);
    };
    sdk = {
      apiUrl: `${srv.url}/e2b`,
      apiKey: KEY,
      domain: `localhost:${new URL(srv.url).port}`,
      retries: 0,
      logger: { info: log, error: () => undefined, warn: () => undefined, debug: () => undefined },
    };
  });
  afterAll(async () => {
    if (srv) {
      const left = (await (await fetch(`${srv.url}/api/v1/sandboxes`, { headers: { 'x-api-key': KEY } })).json()) as Array<{ id: string }>;
      for (const s of left) await fetch(`${srv.url}/api/v1/sandboxes/${s.id}`, { method: 'DELETE', headers: { 'x-api-key': KEY } });
      await srv.close();
    }
    rmSync(dir, { recursive: true, force: true });
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b/`)).toBe(true);
  });

  it('creates a running container with metadata, lists and gets it, and kill removes it', async () => {
    const sbx = await Sandbox.create({ ...sdk, metadata: { suite: 'docker-e2b' }, envs: { FOO: 'bar' }, timeoutMs: 120_000 });
    const rec = await srv.plane.deps.store.getSandbox(sbx.sandboxId);
    expect(rec).toMatchObject({ provider: 'docker', image: TEST_IMAGE, state: 'running', env: { FOO: 'bar' } });
    const container = await docker.getContainer(rec!.runtime_id!).inspect();
    expect(container.State.Running).toBe(true);

    const listed = await Sandbox.list({ ...sdk, query: { metadata: { suite: 'docker-e2b' } } }).nextItems();
    expect(listed.map((s) => s.sandboxId)).toEqual([sbx.sandboxId]);
    expect((await Sandbox.getInfo(sbx.sandboxId, sdk as never)).memoryMB).toBe(64);

    expect(await sbx.kill()).toBe(true);
    await expect(docker.getContainer(rec!.runtime_id!).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(Sandbox.getInfo(sbx.sandboxId, sdk as never)).rejects.toBeInstanceOf(NotFoundError);
  }, 120_000);
});
