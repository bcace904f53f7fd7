/**
 * The pool provider (DESIGN.md §8) over the in-memory provider: slot choice under concurrency,
 * the queue, and no runtime left behind when a workspace cannot be made.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { parsePoolId, PoolProvider, type PoolOptions } from '../../src/core/pool/pool-provider.js';
import type { Provider, SandboxRecord } from '../../src/core/ports.js';

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

function pool(base: Provider, extra: Partial<PoolOptions> = {}, rows: SandboxRecord[] = []): PoolProvider {
  return new PoolProvider(base, {
    settings: { enabled: true, max_vms: 2, max_users_per_vm: 2, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
    store: { listSandboxes: async () => rows },
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
});
