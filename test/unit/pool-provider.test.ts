/**
 * The pool provider (DESIGN.md §8) over the in-memory provider: slot choice under concurrency,
 * the queue, no runtime left behind when a workspace cannot be made, and uids never given twice
 * in a runtime's life.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { PoolProvider, type PoolOptions } from '../../src/core/pool/pool-provider.js';
import { parsePoolId, POOL_UID_SPAN } from '../../src/core/pool/slots.js';
import type { PoolUidStore, Provider, SandboxRecord } from '../../src/core/ports/index.js';

let n = 0;
let base: Provider;
beforeEach(() => {
  base = createMemoryProvider({ name: 'mock' });
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setTimerTickMode('nextTimerAsync');
});
afterEach(() => {
  vi.useRealTimers();
});

const runtimes = async () => (await base.listRuntimes!()).filter((r) => r.runtime_id.startsWith('pool-'));

/** The store's uid counters (the SQL ones pass the store contract), each runtime's starting at `start`. */
function counters(start = 0): PoolUidStore & { given: Map<string, number> } {
  const given = new Map<string, number>();
  return {
    given,
    takePoolUid: async (rt) => {
      const v = given.get(rt) ?? start;
      given.set(rt, v + 1);
      return v;
    },
    forgetPoolRuntime: async (rt) => void given.delete(rt),
  };
}

function pool(base: Provider, extra: Partial<PoolOptions> = {}, rows: SandboxRecord[] = [], uids = counters()): PoolProvider {
  return new PoolProvider(base, {
    settings: { enabled: true, max_vms: 2, max_users_per_vm: 2, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
    store: { listSandboxes: async () => rows, ...uids },
    overflow: 'reject',
    queueTimeoutMs: 0,
    runtimeName: () => `pool-${++n}`,
    ...extra,
  });
}

const spec = (id: string) => ({ sandbox_id: id, image: 'img', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: id });

describe('PoolProvider', () => {
  it('ten concurrent spawns into 2 runtimes of 2: exactly four workspaces, two runtimes, six refusals', async () => {
    const p = pool(base);
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => p.spawn(spec(`sb-c${i}`))));
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok).toHaveLength(4);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'unavailable' });
    expect(await runtimes()).toHaveLength(2);
    expect(await p.view()).toMatchObject({ vms: 2, total_users: 4 });
    // Every slot is distinct within its runtime.
    const ids = ok.map((r) => parsePoolId((r as PromiseFulfilledResult<{ runtime_id: string }>).value.runtime_id)!);
    expect(new Set(ids.map((x) => `${x.runtime}/${x.slot}`)).size).toBe(4);
  });

  it('queue mode: a spawn waits for a freed slot and takes it', async () => {
    const p = pool(base, {
      overflow: 'queue',
      queueTimeoutMs: 5_000,
      settings: { enabled: true, max_vms: 1, max_users_per_vm: 1, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
    });
    const first = await p.spawn(spec('sb-q1'));
    const waiting = p.spawn(spec('sb-q2'));
    await new Promise((r) => setTimeout(r, 100));
    await p.destroy(first.runtime_id);
    const second = await waiting;
    expect(parsePoolId(second.runtime_id)).toMatchObject({ sandbox_id: 'sb-q2', slot: 0 });
    expect(await runtimes()).toHaveLength(1);
  });

  it('a workspace that cannot be made leaves no runtime behind', async () => {
    const broken: Provider = {
      ...base,
      workspace: (id, ws) => ({ ...base.workspace!(id, ws), prepare: async () => Promise.reject(new Error('disk full')) }),
    };
    const p = pool(broken);
    await expect(p.spawn(spec('sb-b1'))).rejects.toThrow('disk full');
    expect(await runtimes()).toHaveLength(0);
    expect(await p.view()).toMatchObject({ vms: 0, total_users: 0 });
  });

  it('slot assignments come back from the stored rows; a destroyed workspace no longer answers', async () => {
    const p1 = pool(base);
    const a = await p1.spawn(spec('sb-r1'));
    await p1.writeFile(a.runtime_id, '/x.txt', Buffer.from('kept'), undefined);
    const row = { id: 'sb-r1', state: 'running', runtime_id: a.runtime_id } as SandboxRecord;
    const p2 = pool(base, {}, [row]);
    expect(await p2.view()).toMatchObject({ vms: 1, total_users: 1 });
    expect(Buffer.from(await p2.readFile(a.runtime_id, '/x.txt')).toString()).toBe('kept');
    expect(await p2.status(a.runtime_id)).toBe('running');
    await p2.destroy(a.runtime_id);
    expect(await p2.status(a.runtime_id)).toBe('missing');
    await expect(p2.readFile(a.runtime_id, '/x.txt')).rejects.toMatchObject({ code: 'not_found' });
    expect(await runtimes()).toHaveLength(0);
  });

  it('a freed slot never gives its uid again in that runtime: the next tenant gets the next one', async () => {
    const uids = counters();
    const p = pool(base, {}, [], uids);
    const a = parsePoolId((await p.spawn(spec('sb-u1'))).runtime_id)!;
    const b = parsePoolId((await p.spawn(spec('sb-u2'))).runtime_id)!;
    expect([a.slot, b.slot]).toEqual([0, 1]);
    await p.destroy(`pool:0:sb-u1:${a.runtime}`);
    const c = parsePoolId((await p.spawn(spec('sb-u3'))).runtime_id)!;
    expect(c).toMatchObject({ runtime: a.runtime, slot: 2 });
    // The last tenant's destroy removes the runtime and forgets its counter.
    await p.destroy(`pool:1:sb-u2:${a.runtime}`);
    await p.destroy(`pool:2:sb-u3:${a.runtime}`);
    expect(await runtimes()).toHaveLength(0);
    expect(uids.given.size).toBe(0);
  });

  it('a runtime whose counter is used up takes no one new, and goes with its last tenant', async () => {
    const p = pool(
      base,
      { settings: { enabled: true, max_vms: 2, max_users_per_vm: 3, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' } },
      [],
      counters(POOL_UID_SPAN - 1),
    );
    const a = parsePoolId((await p.spawn(spec('sb-x1'))).runtime_id)!;
    expect(a.slot).toBe(POOL_UID_SPAN - 1);
    // The first runtime is used up: a second one starts, then it is used up too and max_vms is reached.
    const b = parsePoolId((await p.spawn(spec('sb-x2'))).runtime_id)!;
    expect(b.runtime).not.toBe(a.runtime);
    await expect(p.spawn(spec('sb-x3'))).rejects.toMatchObject({ code: 'unavailable' });
    expect(await runtimes()).toHaveLength(2);
    await p.destroy(`pool:${a.slot}:sb-x1:${a.runtime}`);
    expect(await runtimes()).toHaveLength(1);
    const c = parsePoolId((await p.spawn(spec('sb-x4'))).runtime_id)!;
    expect([a.runtime, b.runtime]).not.toContain(c.runtime);
  });

  it('slots stored before the counter existed are never given again', async () => {
    const p1 = pool(base, {
      settings: { enabled: true, max_vms: 1, max_users_per_vm: 3, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
    });
    const a = await p1.spawn(spec('sb-o1'));
    const b = await p1.spawn(spec('sb-o2'));
    const rows = [a, b].map((r, i) => ({ id: `sb-o${i + 1}`, state: 'running', runtime_id: r.runtime_id }) as SandboxRecord);
    // A fresh counter (the store before the migration): slots 0 and 1 are taken by the stored rows.
    const p2 = pool(
      base,
      { settings: { enabled: true, max_vms: 1, max_users_per_vm: 3, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' } },
      rows,
    );
    expect(parsePoolId((await p2.spawn(spec('sb-o3'))).runtime_id)).toMatchObject({ slot: 2, runtime: parsePoolId(a.runtime_id)!.runtime });
  });
});
