import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AUTO_PAUSE_EVERY_MS, backgroundTasks, type BackgroundDeps, startBackground } from '../../src/compose/background.js';
import { AUDIT_EVERY_MS } from '../../src/transports/http/plugins/audit.js';

// The table of `sbx serve`'s background tasks (compose/background.ts): what runs, how often,
// which one replica leads; started in one loop and stopped by one call.

interface Calls {
  reaps: Array<{ local: boolean; remote: boolean }>;
  sweeps: number;
  pauses: number;
  beats: number;
  prunes: number;
}

function deps(over: Partial<BackgroundDeps> & { shared?: boolean } = {}): { d: BackgroundDeps; calls: Calls; leader: string[] } {
  const calls: Calls = { reaps: [], sweeps: 0, pauses: 0, beats: 0, prunes: 0 };
  const leader: string[] = [];
  const replicas = { shared: over.shared ?? false, addTask: (t: { name: string }) => void leader.push(t.name) };
  const d: BackgroundDeps = {
    replication: { replicas, reaperEveryMs: 5_000, pruneJournal: async () => undefined } as never,
    sandboxes: {
      reap: async (o: { local: boolean; remote: boolean }) => void calls.reaps.push({ local: o.local, remote: o.remote }),
      pauses: { pauseIdle: async () => void calls.pauses++ },
    } as never,
    processes: { sweep: async () => void calls.sweeps++ } as never,
    idempotency: { prune: async () => undefined } as never,
    reconcileWorkers: async () => undefined,
    reconcileEveryMs: 30_000,
    reapLocal: false,
    heartbeat: async () => void calls.beats++,
    heartbeatEveryMs: 30_000,
    pruneAudit: async () => void calls.prunes++,
    ...over,
  };
  return { d, calls, leader };
}

describe('background tasks', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('one table: names, periods and leadership; optional tasks only when asked for', () => {
    const all = backgroundTasks(deps({ reapLocal: true }).d).map((t) => [t.name, t.every, t.leader]);
    expect(all).toEqual([
      ['reaper', 5_000, true],
      ['reconcile', 30_000, true],
      ['process-sweep', 5_000, false],
      ['local-reaper', 5_000, false],
      ['auto-pause', AUTO_PAUSE_EVERY_MS, false],
      ['heartbeat', 30_000, false],
      ['audit-prune', AUDIT_EVERY_MS, false],
    ]);
    const bare = backgroundTasks(deps({ reconcileWorkers: null, heartbeat: null, pruneAudit: null }).d).map((t) => t.name);
    expect(bare).toEqual(['reaper', 'process-sweep', 'auto-pause']);
  });

  it('leader tasks go to the replicas, the others run on their timers, audit pruning at once; stop ends them', async () => {
    const { d, calls, leader } = deps();
    const warn = vi.fn();
    const bg = startBackground(backgroundTasks(d), d.replication.replicas, { warn } as never);
    expect(leader).toEqual(['reaper', 'reconcile']);
    expect(calls.prunes).toBe(1);
    expect(calls.sweeps).toBe(0);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(calls.sweeps).toBe(1);
    expect(calls.pauses).toBe(5);
    await vi.advanceTimersByTimeAsync(25_000);
    expect(calls.beats).toBe(1);
    bg.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toMatchObject({ sweeps: 6, pauses: 30, beats: 1 });
    expect(warn).not.toHaveBeenCalled();
  });

  it('one pass at a time; a failed pass is logged with its task and the next one runs', async () => {
    let release: (() => void) | undefined;
    let runs = 0;
    const { d } = deps({
      heartbeat: null,
      pruneAudit: null,
      processes: {
        sweep: () => {
          runs++;
          if (runs === 1) return new Promise<void>((r) => (release = r));
          return Promise.reject(new Error('store down'));
        },
      } as never,
    });
    const warn = vi.fn();
    const bg = startBackground(backgroundTasks(d), d.replication.replicas, { warn } as never);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(runs).toBe(1);
    release?.();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(runs).toBe(2);
    expect(warn).toHaveBeenCalledWith({ task: 'process-sweep', err: 'Error: store down' }, 'process-sweep pass failed');
    bg.stop();
  });
});
