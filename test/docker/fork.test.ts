/**
 * Fork on docker (DESIGN.md §16), against the real engine: the shared suite, plus what only docker
 * has — the commit to `sbx-fork/<name>:latest` labelled as this installation's fork image, refused
 * as an `image` by name and by id (400 naming snapshot), removed with the last fork.
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forkContract } from '../fork/fork.contract.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const QUOTA = 6;

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('fork on docker'), () => {
  let docker: Docker;
  let srv: TestServer;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, method, path, body);
  const forkImages = async () =>
    (await docker.listImages({ filters: { label: [`sbx.installation_id=${srv.plane.installationId}`, 'sbx.fork'] } }))
      .map((i) => i.Labels?.['sbx.fork'] ?? '')
      .filter((n) => n !== '');

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({
      providers: { default: 'docker' },
      defaults: { image: TEST_IMAGE, memory_mb: 64, max_sandboxes_per_owner: QUOTA },
    });
  }, 60_000);

  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (!docker || !installation) return;
    await removeInstallation(docker, installation);
    for (const img of await docker.listImages({ filters: { label: [`sbx.installation_id=${installation}`] } }))
      await docker
        .getImage(img.Id)
        .remove({ force: true })
        .catch(() => undefined);
  });

  it('commits a labelled fork image, refused as an image by name and by id; files outside /workspace come too', async () => {
    const parent = await api('POST', '/api/v1/sandboxes', {});
    expect(parent.status).toBe(201);
    const wrote = await api('POST', `/api/v1/sandboxes/${parent.body.id}/exec`, {
      command: 'mkdir -p /opt/deep && echo system-file > /opt/deep/f',
      timeout: '20s',
    });
    expect(wrote.body.exit_code).toBe(0);
    const res = await api('POST', `/api/v1/sandboxes/${parent.body.id}/fork`, {});
    expect(res.status, res.text).toBe(201);
    const child = res.body.sandboxes[0] as { id: string; image: string };
    expect(child.image).toBe(TEST_IMAGE);
    const [name] = await forkImages();
    expect(name).toMatch(/^fork-[a-z0-9]+$/);
    const ref = `sbx-fork/${name}:latest`;
    const info = await docker.getImage(ref).inspect();
    expect(info.Config.Labels).toMatchObject({ 'sbx.installation_id': srv.plane.installationId, 'sbx.fork': name });
    const cat = await api('POST', `/api/v1/sandboxes/${child.id}/exec`, { command: 'cat /opt/deep/f', timeout: '20s' });
    expect(cat.body.stdout).toBe('system-file\n');
    // Its container is the fork's own, not the parent's.
    expect((await docker.getContainer(`sbx-${child.id}`).inspect()).Config.Labels['sbx.sandbox_id']).toBe(child.id);
    // Reachable only through fork: as an `image`, by name or by id, it is refused naming snapshot.
    for (const image of [ref, info.Id, info.Id.replace(/^sha256:/, '').slice(0, 12)]) {
      const bad = await api('POST', '/api/v1/sandboxes', { image });
      expect(bad.status, image).toBe(400);
      expect(bad.body.message).toMatch(/snapshot/);
    }
    await api('DELETE', `/api/v1/sandboxes/${child.id}`);
    await expect(docker.getImage(ref).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await api('DELETE', `/api/v1/sandboxes/${parent.body.id}`);
  }, 120_000);

  forkContract(() => ({ url: srv.url, forkImages, quotaOwner: 'fork-quota-owner', quota: QUOTA }), 120_000);
});
