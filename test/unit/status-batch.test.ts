/**
 * Batched reconciliation (DESIGN.md §7, §13): the worker's `worker.status_batch` method (its RPC
 * method table over the in-memory provider and the worker's real SQLite state), and the control
 * plane's pass asking each worker once per batch of its sandboxes — or one sandbox at a time when
 * the worker is older and lacks the method. The RemoteWorkers port is a fake that answers from a
 * real worker's method table; everything else is real (SQLite stores, locator, bus).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { openWorkerState } from '../../src/adapters/stores/worker-state/index.js';
import { RPC_LEASE_POLICY, RPC_PARAMS, RPC_SCOPE, RPC_STATUS_BATCH } from '../../src/contracts/worker-rpc.js';
import { SbxError } from '../../src/core/errors.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { Clock, Provider, RuntimeStatus, SandboxRecord, Store, WorkerRecord } from '../../src/core/ports/index.js';
import { ProviderRegistry } from '../../src/core/providers/registry.js';
import { reconcileRemote, STATUS_BATCH } from '../../src/core/sandboxes/reconcile-remote.js';
import { RuntimeLocator } from '../../src/core/scheduler/locator.js';
import type { RemoteRuntime, RemoteTarget, RemoteWorkers } from '../../src/core/scheduler/remote-port.js';
import type { WorkerState } from '../../src/core/scheduler/worker-state-port.js';
import type { RpcServerDeps } from '../../src/transports/worker-rpc/server/deps.js';
import { dispatch, type ServerLocal } from '../../src/transports/worker-rpc/server/methods.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const clock: Clock = { now: () => new Date(T0) };

function worker(id: string): WorkerRecord {
  const at = new Date(T0).toISOString();
  return {
    id,
    hostname: id,
    status: 'online',
    providers: ['mock'],
    capabilities: [],
    capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0, rpc_url: `http://${id}:7430` },
    last_heartbeat: at,
    created_at: at,
    updated_at: at,
  };
}

function sandbox(id: string, workerId: string, runtimeId: string, state: SandboxRecord['state'] = 'running'): SandboxRecord {
  const at = new Date(T0 - 1000).toISOString();
  return {
    id,
    state,
    provider: 'mock',
    image: 'img',
    memory_mb: 64,
    vcpus: 1,
    created_at: at,
    updated_at: at,
    expires_at: new Date(T0 + 3_600_000).toISOString(),
    metadata: {},
    owner_id: null,
    worker_id: workerId,
    runtime_id: runtimeId,
    template: null,
  };
}

/** One worker: the memory provider, its SQLite state, its RPC method table. */
class WorkerSide {
  readonly provider: Provider = createMemoryProvider({ name: 'mock' });
  readonly state: WorkerState;
  readonly deps: RpcServerDeps;
  constructor(
    readonly id: string,
    dir: string,
  ) {
    this.state = openWorkerState(join(dir, `${id}.db`));
    this.deps = {
      workerId: id,
      credentials: () => ({ shared_token: '', tokens: {}, signing_keys: [], revoked_token_ids: [] }),
      providers: new Map([['mock', this.provider]]),
      spawnDefaults: { provider: 'mock', image: 'img', memory_mb: 64, vcpus: 1 },
      state: this.state,
      clock,
      stagingDir: dir,
      draining: () => false,
      drain: () => undefined,
      log: {} as RpcServerDeps['log'],
    };
  }
  /** A runtime started through `worker.spawn`'s path (the provider, then the state). */
  async start(sandboxId: string): Promise<string> {
    const { runtime_id } = await this.provider.spawn(
      { sandbox_id: sandboxId, image: 'img', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null },
      AbortSignal.timeout(5000),
    );
    this.state.putRuntime({ sandbox_id: sandboxId, provider: 'mock', runtime_id, preview_token: null, network: null, egress: null });
    return runtime_id;
  }
  call(method: 'worker.status_batch' | 'worker.status', params: Record<string, unknown>): Promise<unknown> {
    const local = {} as ServerLocal;
    return dispatch(this.deps, local, { method, params, lease: null, signal: AbortSignal.timeout(5000) });
  }
}

/** The RemoteWorkers port answered by WorkerSide method tables; `old` workers lack the batch (501). */
class Remote implements RemoteWorkers {
  batchCalls: Array<{ worker: string; n: number }> = [];
  singleCalls = 0;
  old = new Set<string>();
  down = new Set<string>();
  constructor(private readonly sides: Map<string, WorkerSide>) {}
  unreachableReason(): string | null {
    return null;
  }
  async statusBatch(w: WorkerRecord, targets: ReadonlyArray<RemoteRuntime>): Promise<Map<string, RuntimeStatus> | null> {
    if (this.down.has(w.id)) throw new SbxError('unavailable', `worker ${w.id} is unreachable`);
    if (this.old.has(w.id)) return null;
    this.batchCalls.push({ worker: w.id, n: targets.length });
    const r = (await this.sides.get(w.id)!.call('worker.status_batch', { sandboxes: [...targets] })) as {
      statuses: Array<{ sandbox_id: string; state: 'running' | 'destroyed' | 'error' }>;
    };
    const map = { running: 'running', destroyed: 'missing', error: 'stopped' } as const;
    return new Map(r.statuses.map((s) => [s.sandbox_id, map[s.state]]));
  }
  provider(w: WorkerRecord, target: RemoteTarget): Provider {
    return {
      status: async (runtimeId: string) => {
        if (this.down.has(w.id)) throw new SbxError('unavailable', `worker ${w.id} is unreachable`);
        this.singleCalls++;
        const r = (await this.sides
          .get(w.id)!
          .call('worker.status', { sandbox_id: target.sandbox_id, provider: target.provider, runtime_id: runtimeId })) as { state: string };
        return r.state === 'running' ? 'running' : r.state === 'destroyed' ? 'missing' : 'stopped';
      },
    } as unknown as Provider;
  }
  async renewLease(): Promise<void> {}
  async drain(): Promise<void> {}
}

describe('worker.status_batch on the worker', () => {
  let dir: string;
  let side: WorkerSide;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-status-batch-'));
    side = new WorkerSide('w1', dir);
  });
  afterEach(() => {
    side.state.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is a read under worker:status, bounded at 1000 runtimes a call', () => {
    expect(RPC_LEASE_POLICY['worker.status_batch']).toBe('none');
    expect(RPC_SCOPE['worker.status_batch']).toBe('worker:status');
    expect(RPC_STATUS_BATCH).toBe(1000);
    expect(STATUS_BATCH).toBeLessThanOrEqual(RPC_STATUS_BATCH);
    expect(RPC_PARAMS['worker.status_batch'].properties.sandboxes).toMatchObject({ minItems: 1, maxItems: 1000 });
  });

  it('judges each runtime as worker.status does, in the order asked; one it cannot judge is an error, not a failed call', async () => {
    const a = await side.start('sb-a');
    const b = await side.start('sb-b');
    const c = await side.start('sb-c');
    // b's runtime dies behind the worker's back; c's state names another runtime than asked.
    await side.provider.destroy(b, AbortSignal.timeout(5000));
    const asked = [
      { sandbox_id: 'sb-a', provider: 'mock', runtime_id: a },
      { sandbox_id: 'sb-b', provider: 'mock', runtime_id: b },
      { sandbox_id: 'sb-c', provider: 'mock', runtime_id: `${c}-old` },
      { sandbox_id: 'sb-gone', provider: 'mock', runtime_id: 'rt-x' },
      { sandbox_id: 'sb-other', provider: 'docker', runtime_id: 'rt-y' },
    ];
    const r = await side.call('worker.status_batch', { sandboxes: asked });
    expect(r).toEqual({
      statuses: [
        { sandbox_id: 'sb-a', state: 'running' },
        { sandbox_id: 'sb-b', state: 'destroyed' },
        { sandbox_id: 'sb-c', state: 'destroyed' },
        { sandbox_id: 'sb-gone', state: 'destroyed' },
        { sandbox_id: 'sb-other', state: 'error', error: 'provider "docker" is not run by worker w1' },
      ],
    });
    // The single call agrees on every runtime it can judge.
    for (const [i, t] of asked.slice(0, 4).entries()) {
      const one = (await side.call('worker.status', t)) as { state: string };
      expect(one.state).toBe((r as { statuses: Array<{ state: string }> }).statuses[i]!.state);
    }
  });
});

describe('reconciliation asks each worker once per batch', () => {
  let dir: string;
  let store: Store;
  let sides: Map<string, WorkerSide>;
  let remote: Remote;
  let locator: RuntimeLocator;
  let bus: EventBus;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-reconcile-batch-'));
    store = await createSqliteStore({ path: ':memory:' });
    await store.migrate();
    sides = new Map([
      ['w1', new WorkerSide('w1', dir)],
      ['w2', new WorkerSide('w2', dir)],
    ]);
    remote = new Remote(sides);
    const providers = new ProviderRegistry(clock, 'mock');
    providers.register(createMemoryProvider({ name: 'mock' }));
    locator = new RuntimeLocator({ store, providers, remote, clock, workerId: 'local', localWorker: false, workersTtlMs: 0 });
    bus = new EventBus(clock);
    for (const w of sides.keys()) await store.upsertWorker(worker(w));
  });
  afterEach(async () => {
    await store.close();
    for (const s of sides.values()) s.state.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `n` running sandboxes on `w`, each with a runtime there; returns their ids. */
  async function populate(w: string, n: number, prefix: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = `sb-${prefix}${String(i).padStart(5, '0')}`;
      await store.insertSandbox(sandbox(id, w, await sides.get(w)!.start(id)));
      ids.push(id);
    }
    return ids;
  }

  it('2,300 sandboxes on w1 and 5 on w2: four calls in all, none per sandbox; lost runtimes destroyed, restored ones running', async () => {
    const one = await populate('w1', 2300, 'a');
    const two = await populate('w2', 5, 'b');
    // w1 lost two runtimes; one of w2's sandboxes was unhealthy and its runtime runs.
    const w1 = sides.get('w1')!;
    for (const id of [one[7]!, one[2200]!]) await w1.provider.destroy(w1.state.getRuntime(id)!.runtime_id, AbortSignal.timeout(5000));
    await store.updateSandbox(two[3]!, { state: 'unhealthy' });

    const actions = await reconcileRemote({ store, locator, bus, clock });
    expect(remote.batchCalls).toEqual([
      { worker: 'w1', n: 1000 },
      { worker: 'w1', n: 1000 },
      { worker: 'w1', n: 300 },
      { worker: 'w2', n: 5 },
    ]);
    expect(remote.singleCalls).toBe(0);
    expect(actions.map((a) => [a.sandbox_id, a.action, a.reason]).sort()).toEqual(
      [
        [one[7], 'mark_destroyed', 'runtime_lost'],
        [one[2200], 'mark_destroyed', 'runtime_lost'],
        [two[3], 'restore', 'worker_back'],
      ].sort(),
    );
    expect((await store.getSandbox(one[7]!))?.state).toBe('destroyed');
    expect((await store.getSandbox(two[3]!))?.state).toBe('running');
    expect((await store.getSandbox(one[8]!))?.state).toBe('running');
  });

  it('an older worker (no status_batch) is asked one sandbox at a time, with the same outcome', async () => {
    remote.old.add('w1');
    const one = await populate('w1', 12, 'a');
    await populate('w2', 3, 'b');
    const w1 = sides.get('w1')!;
    await w1.provider.destroy(w1.state.getRuntime(one[4]!)!.runtime_id, AbortSignal.timeout(5000));
    const actions = await reconcileRemote({ store, locator, bus, clock });
    expect(remote.singleCalls).toBe(12);
    expect(remote.batchCalls).toEqual([{ worker: 'w2', n: 3 }]);
    expect(actions).toEqual([{ action: 'mark_destroyed', sandbox_id: one[4], worker_id: 'w1', reason: 'runtime_lost' }]);
  });

  it('a worker that does not answer its batch: its running sandboxes unhealthy, the other worker still judged', async () => {
    const one = await populate('w1', 3, 'a');
    const two = await populate('w2', 2, 'b');
    remote.down.add('w1');
    const w2 = sides.get('w2')!;
    await w2.provider.destroy(w2.state.getRuntime(two[1]!)!.runtime_id, AbortSignal.timeout(5000));
    const actions = await reconcileRemote({ store, locator, bus, clock });
    expect(actions.map((a) => [a.sandbox_id, a.action, a.reason]).sort()).toEqual(
      [...one.map((id) => [id, 'mark_unhealthy', 'worker_unreachable']), [two[1], 'mark_destroyed', 'runtime_lost']].sort(),
    );
    expect(locator.answering(worker('w1'))).toBe(false);
  });
});
