/**
 * Leader leases (DESIGN §7 "Replicas") on a real store: one holder per task, takeover once the
 * holder stops renewing, and fencing: a replica that finds its lease taken aborts its running pass.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import type { Store } from '../../src/core/ports/index.js';
import { Replicas } from '../../src/core/replicas/replicas.js';

// Unit tier: the waits below run on fake timers that jump to the next timer when nothing else is
// pending, so a 200 ms queue timeout or a 20 ms settle costs no wall time.
beforeAll(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setTimerTickMode('nextTimerAsync');
});
afterAll(() => {
  vi.useRealTimers();
});

let store: Store;
let now = Date.parse('2026-11-25T00:00:00Z');
const clock = { now: () => new Date(now) };
const made: Replicas[] = [];
const warnings: string[] = [];

const replica = (id: string, shared = true) => {
  const r = new Replicas({ leases: store, clock, replicaId: id, ttlMs: 10_000, shared, warn: (_f, msg) => warnings.push(msg) });
  made.push(r);
  return r;
};

/** A task whose pass runs until its signal aborts; `aborted` counts the aborts. */
function longTask() {
  const t = { runs: 0, aborted: 0 };
  return {
    t,
    task: {
      name: 'reaper',
      everyMs: 1e9,
      run: (signal: AbortSignal) =>
        new Promise<void>((resolve) => {
          t.runs++;
          signal.addEventListener('abort', () => {
            t.aborted++;
            resolve();
          });
        }),
    },
  };
}

beforeEach(async () => {
  store = await createSqliteStore({ path: ':memory:' });
  await store.migrate();
});

afterEach(async () => {
  for (const r of made.splice(0)) await r.close();
  await store.close();
});

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('leader tasks', () => {
  it('one replica leads; another takes over when the leader stops renewing; the old leader aborts its pass', async () => {
    const a = replica('ra');
    const b = replica('rb');
    await a.start();
    await b.start();
    const ta = longTask();
    const tb = longTask();
    a.addTask(ta.task);
    await settle();
    b.addTask(tb.task);
    await settle();
    expect(a.leads('reaper')).toBe(true);
    expect(b.leads('reaper')).toBe(false);
    expect(ta.t.runs).toBe(1);
    expect(tb.t.runs).toBe(0);
    expect(await b.leaders(['reaper', 'warm'])).toEqual({ reaper: 'ra', warm: null });
    expect(await a.live()).toEqual(['ra', 'rb']);

    // ra stops renewing (its ticks never come) while time passes beyond the TTL: rb takes over.
    now += 11_000;
    await b.tick();
    expect(b.leads('reaper')).toBe(true);
    expect(tb.t.runs).toBe(1);
    expect(await a.leaders(['reaper'])).toEqual({ reaper: 'rb' });
    // ra ticks again: its lease is someone else's, so its pass is aborted and it stops leading.
    await a.tick();
    expect(a.leads('reaper')).toBe(false);
    expect(ta.t.aborted).toBe(1);
    expect(tb.t.aborted).toBe(0);
  });

  it('a clean stop gives the lease back at once', async () => {
    const a = replica('ra');
    const b = replica('rb');
    await a.start();
    await b.start();
    a.addTask(longTask().task);
    await settle();
    b.addTask(longTask().task);
    await settle();
    expect(b.leads('reaper')).toBe(false);
    await a.close();
    await b.tick();
    expect(b.leads('reaper')).toBe(true);
    expect(await b.live()).toEqual(['rb']);
  });

  it('every replica starts with its own local worker; each is live while its lease is', async () => {
    const ra = replica('ra');
    const rb = replica('rb');
    await ra.start();
    await rb.start();
    expect(await ra.isLive('rb')).toBe(true);
    expect(await rb.isLive('ra')).toBe(true);
    expect(await ra.isLive('nobody')).toBe(false);
    await rb.close();
    expect(await ra.isLive('rb')).toBe(false);
  });

  it('a store of its own: the replica leads every task it has, without leases', async () => {
    const solo = replica('solo', false);
    await solo.start();
    const t = longTask();
    solo.addTask(t.task);
    await settle();
    expect(solo.leads('reaper')).toBe(true);
    expect(t.t.runs).toBe(1);
    expect(await solo.leaders(['reaper', 'reconcile'])).toEqual({ reaper: 'solo', reconcile: null });
    expect(await store.listLeases()).toEqual([]);
  });
});
