/** Snapshots and volumes of sandboxes on a remote worker (DESIGN.md §10): kept by the worker, spawns pinned to it. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

describe('snapshots and volumes through a worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-snapvol-worker-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'sv-token' } });
    worker = await startTestWorker(dir, { id: 'sw', controlPlane: cp.url, auth: { worker_token: 'sv-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const write = (id: string, path: string, text: string) =>
    fetch(`${cp.url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: text,
    });
  const read = async (id: string, path: string) => {
    const r = await fetch(`${cp.url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`);
    return r.status === 200 ? await r.text() : `status ${r.status}`;
  };

  it('a snapshot of a remote sandbox is kept by its worker; a spawn from it goes there and has its files', async () => {
    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
    expect(sb.status).toBe(201);
    expect((await cp.plane.deps.store.getSandbox(sb.body.id))?.worker_id).toBe('sw');
    expect((await write(sb.body.id, '/workspace/kept.txt', 'from before')).status).toBeLessThan(300);
    const snap = await call(cp.url, 'POST', `/api/v1/sandboxes/${sb.body.id}/snapshot`, { name: 'remote-snap' });
    expect(snap.status).toBe(201);
    expect(snap.body).toMatchObject({ name: 'remote-snap', provider: 'mock' });
    const from = await call(cp.url, 'POST', '/api/v1/sandboxes', { snapshot: 'remote-snap' });
    expect(from.status).toBe(201);
    expect((await cp.plane.deps.store.getSandbox(from.body.id))?.worker_id).toBe('sw');
    expect(await read(from.body.id, '/workspace/kept.txt')).toBe('from before');
    expect((await call(cp.url, 'DELETE', '/api/v1/snapshots/remote-snap')).body).toEqual({ status: 'deleted' });
    expect((await call(cp.url, 'POST', '/api/v1/sandboxes', { snapshot: 'remote-snap' })).status).toBe(404);
  });

  it('a volume made on the worker outlives its sandbox and is seen by the next one there', async () => {
    const v = await call(cp.url, 'POST', '/api/v1/volumes', { name: 'remote-vol', provider: 'mock' });
    expect(v.status).toBe(201);
    const a = await call(cp.url, 'POST', '/api/v1/sandboxes', { volumes: [{ name: 'remote-vol', mount_path: '/data' }] });
    expect(a.status).toBe(201);
    expect((await cp.plane.deps.store.getSandbox(a.body.id))?.worker_id).toBe('sw');
    expect((await write(a.body.id, '/data/note.txt', 'persisted')).status).toBeLessThan(300);
    expect((await call(cp.url, 'DELETE', '/api/v1/volumes/remote-vol')).status).toBe(409);
    await call(cp.url, 'DELETE', `/api/v1/sandboxes/${a.body.id}`);
    const b = await call(cp.url, 'POST', '/api/v1/sandboxes', { volumes: [{ name: 'remote-vol', mount_path: '/mnt/v' }] });
    expect(b.status).toBe(201);
    expect(await read(b.body.id, '/mnt/v/note.txt')).toBe('persisted');
    await call(cp.url, 'DELETE', `/api/v1/sandboxes/${b.body.id}`);
    const list = (await call(cp.url, 'GET', '/api/v1/volumes')).body as Array<{ name: string; size_bytes: number | null }>;
    expect(list.find((x) => x.name === 'remote-vol')?.size_bytes).toBe(9);
    expect((await call(cp.url, 'DELETE', '/api/v1/volumes/remote-vol')).body).toEqual({ status: 'deleted' });
  });
});
