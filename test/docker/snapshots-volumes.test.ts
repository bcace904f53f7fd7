/**
 * Snapshots and volumes on docker (DESIGN.md §10), against the real engine: a file written before
 * a snapshot is in a sandbox spawned from it; the image is labelled and goes with the delete; a
 * volume written by one sandbox is read by the next and cannot be deleted while mounted.
 */
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
const tag = Date.now().toString(36);

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('snapshots and volumes on docker'), () => {
  let docker: Docker;
  let srv: TestServer;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, method, path, body);

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
  }, 60_000);

  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (!docker || !installation) return;
    await removeInstallation(docker, installation);
    // Whatever a failed test left: this installation's snapshot images and volumes.
    const label = `sbx.installation_id=${installation}`;
    for (const img of await docker.listImages({ filters: { label: [label] } }))
      await docker
        .getImage(img.Id)
        .remove({ force: true })
        .catch(() => undefined);
    const vols = (await docker.listVolumes({ filters: { label: [label] } })).Volumes ?? [];
    for (const v of vols)
      await docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined);
  });

  it('snapshot → spawn from it → the file is there; the image is labelled; 409 when taken; delete removes the image', async () => {
    const name = `snap-${tag}`;
    const src = await api('POST', '/api/v1/sandboxes', {});
    expect(src.status).toBe(201);
    expect(
      (await exec(srv.url, src.body.id, 'echo made-before > /workspace/keep.txt && mkdir -p /opt/x && echo deep > /opt/x/y')).exit_code,
    ).toBe(0);
    const made = await api('POST', `/api/v1/sandboxes/${src.body.id}/snapshot`, { name });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body).toMatchObject({ name, image: `sbx-snapshot/${name}:latest`, kernel: null, provider: 'docker' });

    const info = await docker.getImage(`sbx-snapshot/${name}:latest`).inspect();
    expect(made.body.size_bytes).toBe(info.Size);
    expect(info.Config.Labels).toMatchObject({ 'sbx.installation_id': srv.plane.installationId, 'sbx.snapshot': name });

    expect((await api('POST', `/api/v1/sandboxes/${src.body.id}/snapshot`, { name })).status).toBe(409);

    const child = await api('POST', '/api/v1/sandboxes', { snapshot: name });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    expect(child.body).toMatchObject({ image: `sbx-snapshot/${name}:latest`, provider: 'docker', snapshot: name });
    expect((await exec(srv.url, child.body.id, 'cat /workspace/keep.txt /opt/x/y')).stdout).toBe('made-before\ndeep\n');
    // The container's own labels win over those the image took from its source.
    const c = await docker.getContainer(`sbx-${child.body.id}`).inspect();
    expect(c.Config.Labels['sbx.sandbox_id']).toBe(child.body.id);

    expect((await api('DELETE', `/api/v1/snapshots/${name}`)).body).toEqual({ status: 'deleted' });
    await expect(docker.getImage(`sbx-snapshot/${name}:latest`).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await api('GET', '/api/v1/snapshots')).body).toEqual([]);
    // The sandbox started from it keeps running.
    expect((await exec(srv.url, child.body.id, 'cat /workspace/keep.txt')).stdout).toBe('made-before\n');
  }, 120_000);

  it('a volume written by one sandbox is read by the next; delete is 409 while mounted, then removes the docker volume', async () => {
    const name = `vol-${tag}`;
    const made = await api('POST', '/api/v1/volumes', { name });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body).toMatchObject({ name, provider: 'docker' });
    const dv = (await docker.getVolume(`sbx-vol-${name}`).inspect()) as unknown as { Labels: Record<string, string> };
    expect(dv.Labels).toMatchObject({ 'sbx.installation_id': srv.plane.installationId, 'sbx.volume': name });
    expect((await api('POST', '/api/v1/volumes', { name })).status).toBe(409);

    const a = await api('POST', '/api/v1/sandboxes', { volumes: [{ name, mount_path: '/data' }] });
    expect(a.status, JSON.stringify(a.body)).toBe(201);
    expect((await exec(srv.url, a.body.id, 'echo from-a > /data/shared.txt')).exit_code).toBe(0);
    const busy = await api('DELETE', `/api/v1/volumes/${name}`);
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe('conflict');
    expect((await api('DELETE', `/api/v1/sandboxes/${a.body.id}`)).status).toBe(200);

    const b = await api('POST', '/api/v1/sandboxes', { volumes: [{ name, mount_path: '/mnt/in' }] });
    expect(b.status).toBe(201);
    expect((await exec(srv.url, b.body.id, 'cat /mnt/in/shared.txt')).stdout).toBe('from-a\n');
    // The file API reaches into the volume too.
    const read = await fetch(`${srv.url}/api/v1/sandboxes/${b.body.id}/files?path=/mnt/in/shared.txt`);
    expect(await read.text()).toBe('from-a\n');
    const listed = (await api('GET', '/api/v1/volumes')).body as Array<{ name: string; size_bytes: number | null }>;
    const size = listed.find((v) => v.name === name)!.size_bytes;
    // The engine's disk-usage report: the bytes of the file, or null when it has no figure.
    expect(size === null || size === 'from-a\n'.length).toBe(true);
    expect((await api('DELETE', `/api/v1/sandboxes/${b.body.id}`)).status).toBe(200);

    expect((await api('DELETE', `/api/v1/volumes/${name}`)).body).toEqual({ status: 'deleted' });
    await expect(docker.getVolume(`sbx-vol-${name}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
  }, 120_000);
});
