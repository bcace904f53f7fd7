/**
 * Snapshots and volumes over HTTP (DESIGN.md §10) against a real server, the mock provider and a
 * SQLite file that outlives a restart: round trips, bad input, nothing half-created.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let dir: string;
let server: TestServer;
const start = () =>
  startTestServer({
    database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } },
  });
const api = (method: string, path: string, body?: unknown) => call(server.url, method, path, body);
const spawn = async (body: Record<string, unknown> = {}) => {
  const r = await api('POST', '/api/v1/sandboxes', body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
};
const write = (id: string, path: string, content: string) => api('POST', `/api/v1/sandboxes/${id}/files`, { path, content });
const read = async (id: string, path: string) => {
  const r = await fetch(`${server.url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`);
  return { status: r.status, text: await r.text() };
};
const liveCount = async () => (await api('GET', '/api/v1/sandboxes')).body.length as number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-snapvol-'));
  server = await start();
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('snapshots', () => {
  it('snapshot → spawn from it → the files written before are there; 409 when taken; get, list, delete', async () => {
    const id = await spawn();
    expect((await write(id, '/workspace/notes.txt', 'before the snapshot')).status).toBeLessThan(300);
    const made = await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'base-1' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(Object.keys(made.body).sort()).toEqual(['created_at', 'image', 'kernel', 'name', 'provider', 'size_bytes']);
    expect(made.body).toMatchObject({ name: 'base-1', image: 'sbx-snapshot/base-1', kernel: null, provider: 'mock' });
    expect(made.body.size_bytes).toBeGreaterThanOrEqual('before the snapshot'.length);
    // Written after: not in the snapshot.
    await write(id, '/workspace/later.txt', 'after');

    const taken = await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'base-1' });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('conflict');

    const child = await api('POST', '/api/v1/sandboxes', { snapshot: 'base-1' });
    expect(child.status).toBe(201);
    expect(child.body).toMatchObject({ provider: 'mock', image: 'sbx-snapshot/base-1', snapshot: 'base-1' });
    expect(await read(child.body.id, '/workspace/notes.txt')).toEqual({ status: 200, text: 'before the snapshot' });
    expect((await read(child.body.id, '/workspace/later.txt')).status).toBe(404);

    expect((await api('GET', '/api/v1/snapshots/base-1')).body).toEqual(made.body);
    expect((await api('GET', '/api/v1/snapshots')).body).toEqual([made.body]);
    expect((await api('DELETE', '/api/v1/snapshots/base-1')).body).toEqual({ status: 'deleted' });
    expect((await api('GET', '/api/v1/snapshots/base-1')).status).toBe(404);
    expect((await api('DELETE', '/api/v1/snapshots/base-1')).status).toBe(404);
    expect((await api('GET', '/api/v1/snapshots')).body).toEqual([]);
    const events = server.plane.deps.bus.recent().filter((e) => e.type.startsWith('snapshot.'));
    expect(events.map((e) => [e.type, e.data?.name])).toEqual([
      ['snapshot.created', 'base-1'],
      ['snapshot.deleted', 'base-1'],
    ]);
    expect(events[0]).toMatchObject({
      sandbox_id: id,
      data: { provider: 'mock', image: 'sbx-snapshot/base-1', size_bytes: made.body.size_bytes },
    });
    // The sandbox started from it keeps its files.
    expect((await read(child.body.id, '/workspace/notes.txt')).text).toBe('before the snapshot');
  });

  it(
    'bad input: names 400, unknown sandbox 404, unknown snapshot on spawn 404 with nothing created, provider ' +
      'or image beside a snapshot 400',
    async () => {
      const id = await spawn();
      for (const name of ['Upper', '-lead', '', 'a/b', 'x'.repeat(65), 'sp ace', '..']) {
        const r = await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name });
        expect(r.status, name).toBe(400);
        expect(r.body.code).toBe('bad_request');
        expect(typeof r.body.message).toBe('string');
      }
      expect((await api('POST', `/api/v1/sandboxes/${id}/snapshot`, {})).status).toBe(400);
      expect((await api('POST', '/api/v1/sandboxes/sb-nope/snapshot', { name: 'x' })).status).toBe(404);
      await api('DELETE', `/api/v1/sandboxes/${id}`);
      expect((await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'gone' })).status).toBe(404);

      const before = await liveCount();
      const unknown = await api('POST', '/api/v1/sandboxes', { snapshot: 'never-made' });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toEqual({ code: 'not_found', message: 'snapshot never-made not found' });
      expect(await liveCount()).toBe(before);
      expect((await api('POST', '/api/v1/templates', { name: 'from-missing', snapshot: 'never-made' })).status).toBe(404);

      const src = await spawn();
      expect((await api('POST', `/api/v1/sandboxes/${src}/snapshot`, { name: 'fixed' })).status).toBe(201);
      expect((await api('POST', '/api/v1/sandboxes', { snapshot: 'fixed', image: 'alpine' })).status).toBe(400);
      const other = await api('POST', '/api/v1/sandboxes', { snapshot: 'fixed', provider: 'docker' });
      expect(other.status).toBe(400);
      expect(await liveCount()).toBe(before + 1);
    },
  );

  it('a failed copy answers provider_error and leaves no record', async () => {
    const id = await spawn();
    // The data directory's snapshots folder is replaced by a file for a moment: the copy fails.
    const folder = join(dir, 'mock-data', 'snapshots');
    mkdirSync(folder, { recursive: true });
    renameSync(folder, `${folder}.aside`);
    writeFileSync(folder, 'not a directory');
    try {
      const r = await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'doomed' });
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ code: 'provider_error', message: "snapshot doomed: could not copy the sandbox's files" });
      expect((await api('GET', '/api/v1/snapshots/doomed')).status).toBe(404);
      expect((await api('GET', '/api/v1/snapshots')).body.map((x: { name: string }) => x.name)).not.toContain('doomed');
    } finally {
      rmSync(folder);
      renameSync(`${folder}.aside`, folder);
    }
    expect((await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'doomed' })).status).toBe(201);
    expect((await api('DELETE', '/api/v1/snapshots/doomed')).status).toBe(200);
  });

  it('a template with a snapshot spawns from it', async () => {
    const id = await spawn();
    await write(id, '/workspace/t.txt', 'templated');
    expect((await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'for-template' })).status).toBe(201);
    const t = await api('POST', '/api/v1/templates', { name: 'snap-t', snapshot: 'for-template' });
    expect(t.status).toBe(201);
    expect(t.body).toMatchObject({ snapshot: 'for-template', volumes: null, image: null });
    const s = await api('POST', '/api/v1/templates/snap-t/spawn', {});
    expect(s.status).toBe(201);
    expect((await read(s.body.id, '/workspace/t.txt')).text).toBe('templated');
  });
});

describe('volumes', () => {
  it('a volume written by one sandbox is read by the next; delete is 409 while mounted, then deleted', async () => {
    const made = await api('POST', '/api/v1/volumes', { name: 'data' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body).toMatchObject({ name: 'data', provider: 'mock', size_bytes: 0 });
    expect((await api('POST', '/api/v1/volumes', { name: 'data' })).status).toBe(409);

    const a = await api('POST', '/api/v1/sandboxes', { volumes: [{ name: 'data', mount_path: '/data' }] });
    expect(a.status).toBe(201);
    expect(a.body.volumes).toEqual([{ name: 'data', mount_path: '/data' }]);
    expect((await write(a.body.id, '/data/kept.txt', 'outlives the sandbox')).status).toBeLessThan(300);
    // A command working in the volume sees the same file.
    const ex = await api('POST', `/api/v1/sandboxes/${a.body.id}/exec`, { command: 'cat kept.txt', workdir: '/data' });
    expect(ex.body.stdout).toBe('outlives the sandbox');
    const busy = await api('DELETE', '/api/v1/volumes/data');
    expect(busy.status).toBe(409);
    expect(busy.body.message).toContain(a.body.id);
    expect((await api('DELETE', `/api/v1/sandboxes/${a.body.id}`)).status).toBe(200);

    const b = await api('POST', '/api/v1/sandboxes', { volumes: [{ name: 'data', mount_path: '/mnt/d' }] });
    expect(b.status).toBe(201);
    expect(await read(b.body.id, '/mnt/d/kept.txt')).toEqual({ status: 200, text: 'outlives the sandbox' });
    const listed = (await api('GET', '/api/v1/volumes')).body;
    expect(listed.find((v: { name: string }) => v.name === 'data').size_bytes).toBe('outlives the sandbox'.length);
    await api('DELETE', `/api/v1/sandboxes/${b.body.id}`);
    expect((await api('DELETE', '/api/v1/volumes/data')).body).toEqual({ status: 'deleted' });
    expect((await api('DELETE', '/api/v1/volumes/data')).status).toBe(404);
    const events = server.plane.deps.bus.recent().filter((e) => e.type.startsWith('volume.') && e.data?.name === 'data');
    expect(events.map((e) => e.type)).toEqual(['volume.created', 'volume.deleted']);
  });

  it('bad input: names 400, unknown volume on spawn 404 and nothing created, bad mount paths 400, lists sorted', async () => {
    for (const name of ['Data', '_x', '', 'a b', 'x'.repeat(65)]) {
      const r = await api('POST', '/api/v1/volumes', { name });
      expect(r.status, name).toBe(400);
      expect(r.body.code).toBe('bad_request');
    }
    expect((await api('POST', '/api/v1/volumes', { name: 'ok', provider: 'nope' })).status).toBe(400);
    const before = await liveCount();
    const missing = await api('POST', '/api/v1/sandboxes', { volumes: [{ name: 'absent', mount_path: '/data' }] });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ code: 'not_found', message: 'volume absent not found' });
    await api('POST', '/api/v1/volumes', { name: 'zz' });
    await api('POST', '/api/v1/volumes', { name: 'aa' });
    for (const mount_path of ['data', '/', '/a/../b', '/proc/x', '/a/', '']) {
      const r = await api('POST', '/api/v1/sandboxes', { volumes: [{ name: 'zz', mount_path }] });
      expect(r.status, mount_path).toBe(400);
    }
    const twice = await api('POST', '/api/v1/sandboxes', {
      volumes: [
        { name: 'zz', mount_path: '/a' },
        { name: 'aa', mount_path: '/a' },
      ],
    });
    expect(twice.status).toBe(400);
    expect(await liveCount()).toBe(before);
    const names = (await api('GET', '/api/v1/volumes')).body.map((v: { name: string }) => v.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(['aa', 'zz']));
  });
});

describe('restart', () => {
  it('snapshots and volumes survive a server restart on the same database', async () => {
    const id = await spawn();
    await write(id, '/workspace/r.txt', 'across restarts');
    const snap = (await api('POST', `/api/v1/sandboxes/${id}/snapshot`, { name: 'kept' })).body;
    await api('POST', '/api/v1/volumes', { name: 'keep-vol' });
    await server.close();
    server = await start();
    expect((await api('GET', '/api/v1/snapshots/kept')).body).toEqual(snap);
    expect((await api('GET', '/api/v1/volumes')).body.map((v: { name: string }) => v.name)).toContain('keep-vol');
    const child = await spawn({ snapshot: 'kept' });
    expect((await read(child, '/workspace/r.txt')).text).toBe('across restarts');
  });
});

describe('pool mode and ownership', () => {
  it('pool sandboxes answer 501 for snapshots and volumes, naming why', async () => {
    const pool = await startTestServer({ pool: { enabled: true, max_vms: 1, max_users_per_vm: 2 }, providers: { default: 'mock' } });
    try {
      const as = { 'x-user-id': 'alice' };
      const box = await call(pool.url, 'POST', '/api/v1/sandboxes', {}, as);
      expect(box.status).toBe(201);
      const snap = await call(pool.url, 'POST', `/api/v1/sandboxes/${box.body.id}/snapshot`, { name: 'p' }, as);
      expect(snap.status).toBe(501);
      expect(snap.body.code).toBe('not_implemented');
      expect(snap.body.message).toMatch(/pool sandboxes/);
      expect((await call(pool.url, 'POST', '/api/v1/volumes', { name: 'p' }, as)).status).toBe(501);
      const withVol = await call(
        pool.url,
        'POST',
        '/api/v1/sandboxes',
        { volumes: [{ name: 'p', mount_path: '/p' }] },
        { 'x-user-id': 'bob' },
      );
      expect(withVol.status).toBe(501);
      expect((await call(pool.url, 'GET', '/api/v1/pool/status')).body.total_users).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it("with ownership enforced, an owner's snapshots and volumes are theirs and admins'", async () => {
    const ADMIN = 'snapvol-admin-key-0123456789';
    const own = await startTestServer({ auth: { enforce_ownership: true, admin_api_key: ADMIN }, providers: { default: 'mock' } });
    try {
      const alice = { 'x-user-id': 'alice' };
      const bob = { 'x-user-id': 'bob' };
      const box = await call(own.url, 'POST', '/api/v1/sandboxes', {}, alice);
      expect((await call(own.url, 'POST', `/api/v1/sandboxes/${box.body.id}/snapshot`, { name: 'mine' }, bob)).status).toBe(404);
      expect((await call(own.url, 'POST', `/api/v1/sandboxes/${box.body.id}/snapshot`, { name: 'mine' }, alice)).status).toBe(201);
      expect((await call(own.url, 'POST', '/api/v1/volumes', { name: 'alice-vol' }, alice)).status).toBe(201);
      expect((await call(own.url, 'GET', '/api/v1/snapshots', undefined, bob)).body).toEqual([]);
      expect((await call(own.url, 'GET', '/api/v1/volumes', undefined, bob)).body).toEqual([]);
      expect((await call(own.url, 'GET', '/api/v1/snapshots/mine', undefined, bob)).status).toBe(404);
      expect((await call(own.url, 'DELETE', '/api/v1/volumes/alice-vol', undefined, bob)).status).toBe(404);
      expect((await call(own.url, 'POST', '/api/v1/sandboxes', { snapshot: 'mine' }, bob)).status).toBe(404);
      expect((await call(own.url, 'POST', '/api/v1/sandboxes', { volumes: [{ name: 'alice-vol', mount_path: '/v' }] }, bob)).status).toBe(
        404,
      );
      expect(
        (await call(own.url, 'POST', '/api/v1/sandboxes', { snapshot: 'mine', volumes: [{ name: 'alice-vol', mount_path: '/v' }] }, alice))
          .status,
      ).toBe(201);
      const admin = { 'x-admin-api-key': ADMIN };
      expect((await call(own.url, 'GET', '/api/v1/snapshots', undefined, admin)).body.map((s: { name: string }) => s.name)).toEqual([
        'mine',
      ]);
      expect((await call(own.url, 'GET', '/api/v1/volumes', undefined, alice)).body.map((v: { name: string }) => v.name)).toEqual([
        'alice-vol',
      ]);
    } finally {
      await own.close();
    }
  });
});
