/**
 * Fork (DESIGN.md §16) in the unit tier: the whole app through `app.inject` over the in-memory
 * provider. The core rules: a copy of the filesystem at that moment, forks independent of the
 * parent, the parent's shape and owner, count bounds, all-or-nothing admission, idempotency,
 * pool sandboxes 501, `sandbox.created` with `forked_from`, and the fork image removed with its
 * last fork.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { reconcileCatalog } from '../../../src/core/sandboxes/reconcile-catalog.js';
import { fakeClock, startUnitPlane, type UnitPlane } from '../../helpers/unit-plane.js';

let u: UnitPlane;
const T0 = Date.UTC(2030, 0, 1);
beforeAll(async () => {
  fakeClock(T0);
  u = await startUnitPlane({ defaults: { max_sandboxes_per_owner: 4 } });
});
afterAll(async () => {
  await u?.close();
  vi.useRealTimers();
});

type Sb = { id: string; state: string; provider: string; image: string; memory_mb: number; vcpus: number; owner_id?: string };
type SbFull = Sb & { forked_from?: string; metadata: Record<string, string>; created_at: string; expires_at: string };
const api = (id: string) => `/api/v1/sandboxes/${id}`;
const spawn = async (body: unknown = {}, headers?: Record<string, string>) => {
  const res = await u.req('POST', '/api/v1/sandboxes', body, headers);
  expect(res.status, res.text).toBe(201);
  return res.body as SbFull;
};
const write = async (id: string, path: string, content: string) =>
  expect((await u.req('POST', `${api(id)}/files`, { path, content })).status).toBe(200);
const read = async (id: string, path: string) => {
  const res = await u.req('GET', `${api(id)}/files?path=${encodeURIComponent(path)}`);
  return res.status === 200 ? String(res.text) : null;
};
const fork = (id: string, body?: unknown, headers?: Record<string, string>) => u.req('POST', `${api(id)}/fork`, body ?? {}, headers);
const forkImages = async () => await u.provider.listForkImages!();
const destroyAll = async () => {
  for (const s of (await u.req('GET', '/api/v1/sandboxes')).body as Sb[]) await u.req('DELETE', api(s.id));
};

describe('fork', () => {
  it('copies the filesystem written just before; the fork and the parent are independent both ways', async () => {
    const parent = await spawn({ memory_mb: 256, vcpus: 2, metadata: { team: 'a' } });
    await write(parent.id, '/workspace/note.txt', 'before');
    const res = await fork(parent.id);
    expect(res.status, res.text).toBe(201);
    expect(res.body.sandboxes).toHaveLength(1);
    const child = res.body.sandboxes[0] as SbFull;
    expect(child.id).not.toBe(parent.id);
    expect(child).toMatchObject({
      state: 'running',
      provider: parent.provider,
      image: parent.image,
      memory_mb: 256,
      vcpus: 2,
      forked_from: parent.id,
      metadata: { team: 'a' },
    });
    // The server's default TTL (30 min), not the parent's remaining one.
    expect(Date.parse(child.expires_at) - Date.parse(child.created_at)).toBe(30 * 60_000);
    expect(await read(child.id, '/workspace/note.txt')).toBe('before');
    await write(child.id, '/workspace/note.txt', 'child');
    await write(parent.id, '/workspace/parent-only.txt', 'p');
    expect(await read(parent.id, '/workspace/note.txt')).toBe('before');
    expect(await read(child.id, '/workspace/parent-only.txt')).toBeNull();
    expect((await u.req('GET', api(child.id))).body.forked_from).toBe(parent.id);
    // The parent itself is no fork.
    expect((await u.req('GET', api(parent.id))).body.forked_from).toBeUndefined();
    // Each fork is announced like a spawn, naming its parent.
    const created = u.plane.deps.bus.recent().filter((e) => e.type === 'sandbox.created' && e.sandbox_id === child.id);
    expect(created).toHaveLength(1);
    expect(created[0]!.data).toMatchObject({ forked_from: parent.id, provider: parent.provider });
    await destroyAll();
  });

  it('count 3 makes three, with the given TTL and metadata', async () => {
    const parent = await spawn();
    await write(parent.id, '/workspace/a', 'x');
    const res = await fork(parent.id, { count: 3, ttl: '10m', metadata: { run: '7' } });
    expect(res.status, res.text).toBe(201);
    const kids = res.body.sandboxes as SbFull[];
    expect(new Set(kids.map((k) => k.id)).size).toBe(3);
    for (const k of kids) {
      expect(k.metadata).toEqual({ run: '7' });
      expect(Date.parse(k.expires_at) - Date.parse(k.created_at)).toBe(10 * 60_000);
      expect(await read(k.id, '/workspace/a')).toBe('x');
    }
    expect((await u.req('GET', '/api/v1/sandboxes')).body).toHaveLength(4);
    await destroyAll();
  });

  it('count 0, 50, 1.5 or a bad ttl → 400, nothing made; an unknown sandbox → 404', async () => {
    const parent = await spawn();
    for (const body of [{ count: 0 }, { count: 50 }, { count: 1.5 }, { count: '2' }, { ttl: 'soon' }, { extra: true }]) {
      const res = await fork(parent.id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('bad_request');
    }
    expect((await fork('sb-nosuchthing')).status).toBe(404);
    expect((await u.req('GET', '/api/v1/sandboxes')).body).toHaveLength(1);
    expect(await forkImages()).toEqual([]);
    await destroyAll();
  });

  it('admission is all or nothing: count 3 with room for 2 makes none (429 as a spawn), count 2 fits', async () => {
    // An owner quota of 4: a parent and one more leave room for 2.
    const bob = { 'x-user-id': 'bob' };
    const parent = await spawn({}, bob);
    await spawn({}, bob);
    const runtimesBefore = (await u.provider.listRuntimes!()).length;
    try {
      const res = await fork(parent.id, { count: 3 }, bob);
      expect(res.status, res.text).toBe(429);
      expect(res.body.code).toBe('resource_limit');
      expect((await u.req('GET', '/api/v1/sandboxes')).body).toHaveLength(2);
      expect((await u.provider.listRuntimes!()).length).toBe(runtimesBefore);
      expect(await forkImages()).toEqual([]);
      const ok = await fork(parent.id, { count: 2 }, bob);
      expect(ok.status, ok.text).toBe(201);
      expect((await u.req('GET', '/api/v1/sandboxes')).body).toHaveLength(4);
      // Full now: a spawn is refused the same way.
      expect((await u.req('POST', '/api/v1/sandboxes', {}, bob)).status).toBe(429);
    } finally {
      await destroyAll();
    }
  });

  it('a fork that fails midway takes the forks already made with it and leaves no fork image', async () => {
    const parent = await spawn();
    // The secret bindings hook (DESIGN §15) runs before each fork starts: it fails the third; the bindings of the ones made go again.
    const deps = u.plane.deps.sandboxes.deps;
    let forks = 0;
    const dropped: string[] = [];
    deps.forkSecrets = {
      copyBindings: async (parentId) => {
        expect(parentId).toBe(parent.id);
        if (++forks === 3) throw new Error('secrets store down');
      },
      dropBindings: async (childId) => void dropped.push(childId),
    };
    try {
      const res = await fork(parent.id, { count: 3 });
      expect(res.status, res.text).toBe(500);
      expect(res.body.code).toBe('provider_error');
    } finally {
      delete deps.forkSecrets;
    }
    expect(dropped).toHaveLength(1);
    expect(forks).toBe(3);
    expect(((await u.req('GET', '/api/v1/sandboxes')).body as Sb[]).map((s) => s.id)).toEqual([parent.id]);
    expect((await u.provider.listRuntimes!()).map((r) => r.sandbox_id)).toEqual([parent.id]);
    expect(await forkImages()).toEqual([]);
    await destroyAll();
  });

  it('Idempotency-Key: a retry answers the same forks without forking; another body → 409', async () => {
    const parent = await spawn();
    const key = { 'idempotency-key': 'fork-once-1' };
    const first = await fork(parent.id, { count: 2 }, key);
    expect(first.status).toBe(201);
    const again = await fork(parent.id, { count: 2 }, key);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((again.body.sandboxes as Sb[]).map((s) => s.id).sort()).toEqual((first.body.sandboxes as Sb[]).map((s) => s.id).sort());
    expect((await u.req('GET', '/api/v1/sandboxes')).body).toHaveLength(3);
    expect((await fork(parent.id, { count: 1 }, key)).status).toBe(409);
    await destroyAll();
  });

  it('the fork image goes with the last fork destroyed, not before', async () => {
    const parent = await spawn();
    const res = await fork(parent.id, { count: 2 });
    const [a, b] = res.body.sandboxes as Sb[];
    expect(await forkImages()).toHaveLength(1);
    await u.req('DELETE', api(a!.id));
    expect(await forkImages()).toHaveLength(1);
    await u.req('DELETE', api(b!.id));
    expect(await forkImages()).toEqual([]);
    // The parent is untouched and can fork again.
    expect((await fork(parent.id)).status).toBe(201);
    await destroyAll();
    expect(await forkImages()).toEqual([]);
  });
});

describe('reconciliation of fork images', () => {
  it('removes a fork image no live fork uses (past the grace period), keeps one a live fork uses', async () => {
    const parent = await spawn();
    const res = await fork(parent.id);
    const [child] = res.body.sandboxes as Sb[];
    // A copy left by a server that died before storing any fork from it.
    const rt = (await u.provider.listRuntimes!()).find((r) => r.sandbox_id === parent.id)!;
    await u.provider.forkImage!(rt.runtime_id, 'fork-leftover0001');
    expect(await forkImages()).toHaveLength(2);
    const deps = {
      store: u.plane.deps.store,
      providers: new Map([[u.provider.name, u.provider]]),
      bus: u.plane.deps.bus,
      clock: { now: () => new Date() },
      workerId: 'local',
    };
    // Young: left alone (a replica may be storing its forks right now).
    expect(await reconcileCatalog(deps)).toEqual([]);
    expect(await forkImages()).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(11 * 60_000);
    const actions = await reconcileCatalog(deps);
    expect(actions).toEqual([{ action: 'remove_orphan_fork_image', provider: u.provider.name, runtime_id: 'fork-leftover0001' }]);
    const left = await forkImages();
    expect(left.map((f) => f.name)).toEqual([(await u.plane.deps.store.getSandbox(child!.id))!.fork]);
    await destroyAll();
    expect(await forkImages()).toEqual([]);
  });
});

describe('fork in pool mode', () => {
  it('answers 501 not_implemented for a pool sandbox', async () => {
    const p = await startUnitPlane({ pool: { enabled: true, provider: 'memory', max_vms: 1, max_users_per_vm: 4 } });
    try {
      const s = await p.req('POST', '/api/v1/sandboxes', {}, { 'x-user-id': 'alice' });
      expect(s.status, s.text).toBe(201);
      const res = await p.req('POST', `/api/v1/sandboxes/${s.body.id}/fork`, {}, { 'x-user-id': 'alice' });
      expect(res.status).toBe(501);
      expect(res.body.code).toBe('not_implemented');
      expect((await p.req('GET', '/api/v1/sandboxes', undefined, { 'x-user-id': 'alice' })).body).toHaveLength(1);
    } finally {
      await p.close();
    }
  });
});
