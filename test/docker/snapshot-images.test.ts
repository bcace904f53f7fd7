/**
 * Snapshot images are reachable only through `snapshot` (DESIGN.md §10), against the real engine:
 * tenant A snapshots a sandbox holding a secret; tenant B cannot start from it by any spelling of
 * its image — the `sbx-snapshot/` name, an id prefix, the id as a digest — nor by a template or a
 * warm shape naming it (400 naming `snapshot`, and no container of it is ever made for B), while
 * A's own `{snapshot}` spawn still works.
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const API_KEY = 'snapimg-user-key-5a7c9e1b3d5f7a9c1e3b5d7f';
const ADMIN_KEY = 'snapimg-admin-key-2b4d6f8a0c2e4b6d8f0a2c4e';
const as = (user: string) => ({ 'x-api-key': API_KEY, 'x-user-id': user });
const admin = { 'x-admin-api-key': ADMIN_KEY };
const tag = Date.now().toString(36);

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('snapshot images only through snapshot on docker'), () => {
  let docker: Docker;
  let srv: TestServer;

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({
      providers: { default: 'docker' },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
      auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY, enforce_ownership: true },
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

  /** The containers of this installation made from image `id`. */
  const containersOf = async (id: string) =>
    (await docker.listContainers({ all: true, filters: { label: [`sbx.installation_id=${srv.plane.installationId}`] } })).filter(
      (c) => c.ImageID === id,
    );

  it("B reaches A's snapshot by no image spelling, template or warm shape; A's {snapshot} spawn works", async () => {
    const name = `secret-${tag}`;
    const a = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'));
    expect(a.status).toBe(201);
    const wrote = await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${a.body.id}/files`,
      { path: '/srv/secret.txt', content: 'alice-only' },
      as('alice'),
    );
    expect(wrote.status).toBe(200);
    const snap = await call(srv.url, 'POST', `/api/v1/sandboxes/${a.body.id}/snapshot`, { name }, as('alice'));
    expect(snap.status, JSON.stringify(snap.body)).toBe(201);
    const { Id: id, Config } = await docker.getImage(`sbx-snapshot/${name}:latest`).inspect();
    expect(Config.Labels).toMatchObject({ 'sbx.snapshot': name });
    const hex = id.replace(/^sha256:/, '');

    // By name B's snapshot spawn is a 404 (not hers); every image spelling of it is a 400 naming `snapshot`.
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', { snapshot: name }, as('bob'))).status).toBe(404);
    const spellings = [
      `sbx-snapshot/${name}:latest`,
      `sbx-snapshot/${name}`,
      `docker.io/sbx-snapshot/${name}:latest`,
      `sbx-snapshot/not-there-${tag}:latest`, // never pulled either
      hex.slice(0, 12), // id prefix
      hex,
      id, // sha256:… digest of the image
    ];
    for (const image of spellings) {
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes', { image }, as('bob'));
      expect(res.status, `${image}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body).toMatchObject({ code: 'bad_request', message: expect.stringContaining('"snapshot"') });
    }

    // Through a template, and a template's warm shape: refused the same; the warm pool never starts one.
    const t = await call(srv.url, 'POST', '/api/v1/templates', { name: `steal-${tag}`, image: hex.slice(0, 16), warm: 1 }, as('bob'));
    expect(t.status, JSON.stringify(t.body)).toBe(201);
    const viaTemplate = await call(srv.url, 'POST', `/api/v1/templates/steal-${tag}/spawn`, {}, as('bob'));
    expect(viaTemplate.status, JSON.stringify(viaTemplate.body)).toBe(400);
    expect(viaTemplate.body.message).toContain('"snapshot"');
    const t2 = await call(srv.url, 'POST', '/api/v1/templates', { name: `steal2-${tag}`, image: id }, as('bob'));
    expect(t2.status).toBe(201);
    expect((await call(srv.url, 'POST', `/api/v1/templates/steal2-${tag}/spawn`, {}, as('bob'))).status).toBe(400);
    const shape = async () => {
      const warm = (await call(srv.url, 'GET', '/api/v1/diagnostics', undefined, admin)).body.warm as Array<{
        shape: { image: string };
        ready: number;
        misses: number;
      }>;
      return warm.find((w) => w.shape.image === hex.slice(0, 16));
    };
    // The pool has tried the shape (it counts a miss for the template spawn) and keeps none ready.
    const deadline = Date.now() + 10_000;
    while (!(await shape()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1_500)); // a refill pass or two
    expect(await shape()).toMatchObject({ ready: 0 });
    expect(await containersOf(id)).toEqual([]);

    // A's own spawn from her snapshot still works and holds the file.
    const child = await call(srv.url, 'POST', '/api/v1/sandboxes', { snapshot: name }, as('alice'));
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    const read = await call(srv.url, 'GET', `/api/v1/sandboxes/${child.body.id}/files?path=/srv/secret.txt`, undefined, as('alice'));
    expect(read.text).toBe('alice-only');
    expect((await containersOf(id)).map((c) => c.Labels['sbx.sandbox_id'])).toEqual([child.body.id]);
  }, 120_000);
});
