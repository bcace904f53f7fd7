/**
 * Fork (DESIGN.md §16) against a real server, one suite for every provider and for a worker: a
 * file written just before is in each fork, forks and parent are independent both ways, count
 * bounds, all-or-nothing admission against an owner quota, and the fork image going with its last
 * fork. Each provider's file adds what only it has.
 */
import { expect, it } from 'vitest';
import { call } from '../helpers/http.js';

export interface ForkTarget {
  url: string;
  /** Names of the fork images the provider holds now. */
  forkImages(): Promise<string[]>;
  /** An owner (X-User-ID) whose quota is `quota` sandboxes. */
  quotaOwner: string;
  quota: number;
}

type Sb = {
  id: string;
  state: string;
  provider: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  forked_from?: string;
  worker_id: string;
};

export function forkContract(target: () => ForkTarget, timeoutMs = 60_000): void {
  const t = () => target();
  const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    call(t().url, method, path, body, headers);
  const spawn = async (headers?: Record<string, string>) => {
    const r = await api('POST', '/api/v1/sandboxes', {}, headers);
    expect(r.status, r.text).toBe(201);
    return r.body as Sb;
  };
  const write = async (id: string, path: string, content: string) => {
    const r = await api('POST', `/api/v1/sandboxes/${id}/files`, { path, content });
    expect(r.status, r.text).toBe(200);
  };
  const read = async (id: string, path: string) => {
    const r = await fetch(`${t().url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`);
    const text = await r.text();
    return r.status === 200 ? text : `status ${r.status}`;
  };
  const fork = (id: string, body: unknown = {}, headers?: Record<string, string>) =>
    api('POST', `/api/v1/sandboxes/${id}/fork`, body, headers);
  const destroy = (id: string) => api('DELETE', `/api/v1/sandboxes/${id}`);

  it(
    'a fork has the file written just before; fork and parent are independent both ways; same shape and node',
    async () => {
      const parent = await spawn();
      await write(parent.id, '/workspace/state.txt', 'written-before-fork');
      const res = await fork(parent.id);
      expect(res.status, res.text).toBe(201);
      const [child] = res.body.sandboxes as Sb[];
      expect(child).toMatchObject({
        state: 'running',
        provider: parent.provider,
        image: parent.image,
        memory_mb: parent.memory_mb,
        vcpus: parent.vcpus,
        worker_id: parent.worker_id,
        forked_from: parent.id,
      });
      expect(await read(child!.id, '/workspace/state.txt')).toBe('written-before-fork');
      await write(child!.id, '/workspace/state.txt', 'child-changed');
      await write(child!.id, '/workspace/child-only.txt', 'c');
      await write(parent.id, '/workspace/parent-only.txt', 'p');
      expect(await read(parent.id, '/workspace/state.txt')).toBe('written-before-fork');
      expect(await read(parent.id, '/workspace/child-only.txt')).toBe('status 404');
      expect(await read(child!.id, '/workspace/parent-only.txt')).toBe('status 404');
      expect(await read(child!.id, '/workspace/state.txt')).toBe('child-changed');
      await destroy(child!.id);
      await destroy(parent.id);
    },
    timeoutMs,
  );

  it(
    'count 3 makes three forks with the file; count 50 and count 0 → 400 and nothing made',
    async () => {
      const parent = await spawn();
      await write(parent.id, '/workspace/n.txt', 'three');
      for (const count of [50, 0]) {
        const bad = await fork(parent.id, { count });
        expect(bad.status, bad.text).toBe(400);
        expect(bad.body.code).toBe('bad_request');
      }
      expect(await t().forkImages()).toEqual([]);
      const res = await fork(parent.id, { count: 3 });
      expect(res.status, res.text).toBe(201);
      const kids = res.body.sandboxes as Sb[];
      expect(new Set(kids.map((k) => k.id)).size).toBe(3);
      for (const k of kids) expect(await read(k.id, '/workspace/n.txt')).toBe('three');
      for (const k of kids) await destroy(k.id);
      await destroy(parent.id);
    },
    timeoutMs,
  );

  it(
    'a fork past the quota makes none (429), one that fits is made',
    async () => {
      const owner = { 'x-user-id': t().quotaOwner };
      const parent = await spawn(owner);
      const others: Sb[] = [];
      while (others.length < t().quota - 2) others.push(await spawn(owner));
      const listBefore = (await api('GET', '/api/v1/sandboxes', undefined, owner)).body.length as number;
      // Room for one: two forks make none.
      const res = await fork(parent.id, { count: 2 }, owner);
      expect(res.status, res.text).toBe(429);
      expect(res.body.code).toBe('resource_limit');
      expect((await api('GET', '/api/v1/sandboxes', undefined, owner)).body).toHaveLength(listBefore);
      expect(await t().forkImages()).toEqual([]);
      const one = await fork(parent.id, { count: 1 }, owner);
      expect(one.status, one.text).toBe(201);
      for (const s of [...(one.body.sandboxes as Sb[]), ...others, parent]) await destroy(s.id);
    },
    timeoutMs,
  );

  it(
    'destroying the last fork removes the fork image, not before; the parent going first changes nothing',
    async () => {
      const parent = await spawn();
      await write(parent.id, '/workspace/keep.txt', 'kept');
      const res = await fork(parent.id, { count: 2 });
      expect(res.status, res.text).toBe(201);
      const [a, b] = res.body.sandboxes as Sb[];
      expect(await t().forkImages()).toHaveLength(1);
      await destroy(parent.id);
      await destroy(a!.id);
      expect(await t().forkImages()).toHaveLength(1);
      expect(await read(b!.id, '/workspace/keep.txt')).toBe('kept');
      await destroy(b!.id);
      expect(await t().forkImages()).toEqual([]);
    },
    timeoutMs,
  );
}
