/**
 * Placement (pure) and the remote half of the lifecycle in core, with a fake clock: remote spawn
 * holds a lease, an RPC failure releases it and creates nothing, extend renews it, destroy releases
 * it, and reconciliation marks sandboxes of a stale worker `unhealthy` then `running` again. The
 * RemoteWorkers port is a recording fake here (the real RPC is proven by test/worker and the
 * multi-host suite); everything else is real: SQLite store, the in-memory provider for the local node.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { Admission } from '../../src/core/admission/admission.js';
import { SbxError } from '../../src/core/errors.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { SbxEvent } from '../../src/core/events/kinds.js';
import type { Clock, IdSource, LeaseRecord, Provider, RuntimeStatus, Store, WorkerRecord } from '../../src/core/ports/index.js';
import { ProviderRegistry } from '../../src/core/providers/registry.js';
import { ANONYMOUS } from '../../src/core/sandboxes/caller.js';
import { reconcileRemote } from '../../src/core/sandboxes/reconcile-remote.js';
import { SandboxService } from '../../src/core/sandboxes/service.js';
import { RuntimeLocator } from '../../src/core/scheduler/locator.js';
import { place, remoteDefaultProvider, type PlacementInput } from '../../src/core/scheduler/placement.js';
import type { RemoteTarget, RemoteWorkers } from '../../src/core/scheduler/remote-port.js';
import type { CoreSettings } from '../../src/core/settings.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

class FakeClock implements Clock {
  constructor(public ms: number) {}
  now(): Date {
    return new Date(this.ms);
  }
}

class FakeIds implements IdSource {
  private n = 0;
  sandboxId(): string {
    return `sb-p${String(++this.n).padStart(4, '0')}`;
  }
  randomId(): string {
    return `rid-${++this.n}`;
  }
}

function worker(id: string, over: Partial<WorkerRecord> = {}): WorkerRecord {
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
    ...over,
  };
}

describe('place()', () => {
  const base = (over: Partial<PlacementInput> = {}): PlacementInput => ({
    workers: [worker('local'), worker('w1'), worker('w2')],
    local_id: 'local',
    local_enabled: true,
    local_providers: ['mock'],
    active: new Map(),
    active_for_owner: new Map(),
    now: new Date(T0),
    ...over,
  });
  const req = { provider: 'mock', owner_id: null };

  it('chooses the fewest active; ties go to local, then by id', () => {
    expect(place(req, base())).toEqual({ ok: true, worker_id: 'local', local: true, eligible: 3 });
    expect(place(req, base({ active: new Map([['local', 1]]) }))).toMatchObject({ worker_id: 'w1', eligible: 3 });
    expect(
      place(
        req,
        base({
          active: new Map([
            ['local', 2],
            ['w1', 1],
            ['w2', 0],
          ]),
        }),
      ),
    ).toMatchObject({ worker_id: 'w2' });
  });

  it('skips stale, draining, full, per-owner-full and provider-less workers', () => {
    const now = new Date(T0 + 3 * 60_000); // local row's age does not matter; w1 is 3 min old = stale
    const workers = [
      worker('local'),
      worker('w1'),
      worker('w2', { status: 'draining', last_heartbeat: now.toISOString() }),
      worker('w3', { last_heartbeat: now.toISOString(), providers: ['docker'] }),
    ];
    expect(place(req, base({ workers, now, local_enabled: false }))).toEqual({
      ok: false,
      eligible: 0,
      reason: 'no eligible worker for provider mock',
    });
    const full = worker('w4', { last_heartbeat: now.toISOString(), capacity: { max_sandboxes: 2, max_sandboxes_per_owner: 1 } });
    const input = base({ workers: [full], now, local_enabled: false, active: new Map([['w4', 2]]) });
    expect(place(req, input).ok).toBe(false);
    expect(
      place(
        { provider: 'mock', owner_id: 'alice' },
        base({ workers: [full], now, local_enabled: false, active: new Map([['w4', 1]]), active_for_owner: new Map([['w4', 1]]) }),
      ).ok,
    ).toBe(false);
    expect(
      place({ provider: 'mock', owner_id: 'bob' }, base({ workers: [full], now, local_enabled: false, active: new Map([['w4', 1]]) })),
    ).toMatchObject({ ok: true, worker_id: 'w4' });
  });

  it('auto on a pure control plane prefers docker, then proot, then any advertised provider', () => {
    const now = new Date(T0);
    expect(remoteDefaultProvider('auto', [worker('w1', { providers: ['mock', 'proot'] })], now, 'local')).toBe('proot');
    expect(remoteDefaultProvider('auto', [worker('w1', { providers: ['mock'] })], now, 'local')).toBe('mock');
    expect(remoteDefaultProvider('docker', [], now, 'local')).toBe('docker');
    expect(remoteDefaultProvider('auto', [worker('w1', { status: 'draining' })], now, 'local')).toBe('mock');
    expect(remoteDefaultProvider('auto', [worker('local', { providers: ['docker'] })], now, 'local')).toBeNull();
  });
});

/** A worker RPC that records calls and runs nothing; its answers are set per test. */
class FakeRemote implements RemoteWorkers {
  calls: string[] = [];
  leasesSeen: Array<LeaseRecord | null> = [];
  failSpawn = false;
  status: RuntimeStatus | 'unreachable' = 'running';
  unreachableReason(w: WorkerRecord): string | null {
    return w.capacity.rpc_url ? null : `worker ${w.id} advertises no rpc_url`;
  }
  provider(w: WorkerRecord, target: RemoteTarget): Provider {
    const self = this;
    const fail = () => {
      throw new SbxError('not_implemented', 'not in this fake');
    };
    return {
      name: target.provider,
      capabilities: [],
      config: () => ({}),
      health: fail,
      async spawn() {
        self.calls.push(`spawn ${w.id} ${target.sandbox_id}`);
        self.leasesSeen.push(await target.lease());
        if (self.failSpawn) throw new SbxError('unavailable', `worker ${w.id} is unreachable`);
        return { runtime_id: `rt-${target.sandbox_id}` };
      },
      async destroy(runtimeId: string) {
        self.calls.push(`destroy ${w.id} ${runtimeId}`);
        self.leasesSeen.push(await target.lease());
      },
      async status() {
        if (self.status === 'unreachable') throw new SbxError('unavailable', `worker ${w.id} is unreachable`);
        return self.status;
      },
      exec: fail,
      writeFile: fail,
      readFile: fail,
      deleteFile: fail,
      listFiles: fail,
      moveFile: fail,
      chmod: fail,
      stat: fail,
      glob: fail,
      logs: fail,
    } as unknown as Provider;
  }
  async renewLease(w: WorkerRecord, lease: LeaseRecord): Promise<void> {
    this.calls.push(`renew ${w.id} ${lease.resource_id} g${lease.generation}`);
  }
  async drain(w: WorkerRecord): Promise<void> {
    this.calls.push(`drain ${w.id}`);
  }
}

describe('remote lifecycle in core', () => {
  let root: string;
  let store: Store;
  let clock: FakeClock;
  let remote: FakeRemote;
  let events: SbxEvent[];
  let sandboxes: SandboxService;
  let locator: RuntimeLocator;
  let bus: EventBus;

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'sbx-placement-'));
    store = await createSqliteStore({ path: ':memory:' });
    await store.migrate();
    clock = new FakeClock(T0);
    remote = new FakeRemote();
    events = [];
    bus = new EventBus(clock);
    bus.subscribe((e) => events.push(e));
    const settings = {
      version: 'test',
      worker_id: 'local',
      hostname: 'h',
      preview_domain: '',
      default_provider: 'mock',
      defaults: {
        image: 'img',
        memory_mb: 256,
        vcpus: 1,
        ttl_ms: 60_000,
        max_ttl_ms: 3_600_000,
        default_exec_timeout_ms: 0,
        max_exec_timeout_ms: 600_000,
        max_sandboxes: 0,
        max_sandboxes_per_owner: 0,
        spawn_overflow: 'reject',
        spawn_queue_timeout_ms: 1000,
        max_spawn_queue: 10,
      },
      limits: { max_file_bytes: 1 << 20, max_exec_output_bytes: 1 << 20 },
      enforce_ownership: false,
      pool: { enabled: false, max_vms: 4, max_users_per_vm: 8, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
    } as CoreSettings;
    const providers = new ProviderRegistry(clock, 'mock');
    // Registered under the name the workers advertise; this node never spawns (a pure control plane).
    providers.register(createMemoryProvider({ name: 'mock' }));
    // A pure control plane: every spawn goes to a worker. The tests write the registry directly
    // (as another replica would), so placement reads it every time.
    locator = new RuntimeLocator({ store, providers, remote, clock, workerId: 'local', localWorker: false, workersTtlMs: 0 });
    sandboxes = new SandboxService({
      store,
      providers,
      locator,
      admission: new Admission(store, settings, clock, bus),
      bus,
      clock,
      ids: new FakeIds(),
      settings,
    });
    await store.upsertWorker(worker('w1'));
  });

  afterEach(async () => {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('spawns on the worker with a lease of TTL + 5 min, renews it on extend, releases it on destroy', async () => {
    const rec = await sandboxes.spawn({ ttl: '1m' });
    expect(rec).toMatchObject({ worker_id: 'w1', runtime_id: `rt-${rec.id}`, provider: 'mock' });
    expect(remote.leasesSeen[0]).toMatchObject({
      resource_id: rec.id,
      holder_id: 'w1',
      expires_at: new Date(T0 + 6 * 60_000).toISOString(),
    });
    expect(locator.last).toEqual({ selected_worker_id: 'w1', eligible_workers: 1 });

    clock.ms += 30_000;
    await sandboxes.extend(rec.id, '10m', ANONYMOUS);
    const lease = await store.getLease(rec.id);
    expect(lease).toMatchObject({ holder_id: 'w1', expires_at: new Date(T0 + 30_000 + 15 * 60_000).toISOString() });
    expect(remote.calls).toContain(`renew w1 ${rec.id} g${lease!.generation}`);

    await sandboxes.destroy(rec.id, ANONYMOUS);
    expect(remote.calls).toContain(`destroy w1 rt-${rec.id}`);
    expect(remote.leasesSeen.at(-1)).toMatchObject({ generation: lease!.generation });
    expect(await store.getLease(rec.id)).toBeNull();
    expect((await store.getSandbox(rec.id))?.state).toBe('destroyed');
  });

  it('an RPC failure on spawn releases the lease and stores nothing', async () => {
    remote.failSpawn = true;
    await expect(sandboxes.spawn({})).rejects.toMatchObject({ code: 'unavailable' });
    expect(await store.listLeases()).toEqual([]);
    expect(await store.listSandboxes({})).toEqual([]);
  });

  it('no worker, or one without rpc_url: 503 with the reason', async () => {
    await store.deleteWorker('w1');
    await expect(sandboxes.spawn({ provider: 'mock' })).rejects.toMatchObject({ code: 'bad_request' });
    await store.upsertWorker(worker('w2', { capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0 } }));
    await expect(sandboxes.spawn({})).rejects.toMatchObject({
      code: 'remote_worker_rpc_unavailable',
      message: 'worker w2 advertises no rpc_url',
    });
    await store.upsertWorker(worker('w2', { status: 'draining' }));
    await expect(sandboxes.spawn({ provider: 'mock' })).rejects.toMatchObject({
      code: 'unavailable',
      message: 'no eligible worker for provider mock',
    });
  });

  it('reconciliation: stale worker → unhealthy, back → running; past TTL → expired and the lease released', async () => {
    const a = await sandboxes.spawn({ ttl: '10m' });
    const b = await sandboxes.spawn({ ttl: '3m' });
    clock.ms += 150_000; // w1's last heartbeat is now 2.5 min old: stale
    let actions = await reconcileRemote({ store, locator, bus, clock });
    expect(actions.map((x) => [x.sandbox_id, x.action, x.reason])).toEqual([
      [a.id, 'mark_unhealthy', 'worker_stale'],
      [b.id, 'mark_unhealthy', 'worker_stale'],
    ]);
    expect(events.filter((e) => e.type === 'reconcile.action').length).toBe(2);
    clock.ms += 60_000; // b is past its TTL now
    actions = await reconcileRemote({ store, locator, bus, clock });
    expect(actions).toEqual([{ action: 'expire', sandbox_id: b.id, worker_id: 'w1', reason: 'worker_stale' }]);
    expect(await store.getLease(b.id)).toBeNull();
    await store.upsertWorker(worker('w1', { last_heartbeat: clock.now().toISOString() }));
    actions = await reconcileRemote({ store, locator, bus, clock });
    expect(actions).toEqual([{ action: 'restore', sandbox_id: a.id, worker_id: 'w1', reason: 'worker_back' }]);
    expect((await store.getSandbox(a.id))?.state).toBe('running');
    // A fresh draining worker keeps ownership: nothing changes.
    await store.upsertWorker(worker('w1', { status: 'draining', last_heartbeat: clock.now().toISOString() }));
    expect(await reconcileRemote({ store, locator, bus, clock })).toEqual([]);
  });

  it('a worker fresh by its heartbeat but not answering: its sandboxes go unhealthy and spawns go elsewhere', async () => {
    const a = await sandboxes.spawn({});
    await store.upsertWorker(worker('w2'));
    remote.status = 'unreachable';
    const actions = await reconcileRemote({ store, locator, bus, clock });
    expect(actions).toEqual([{ action: 'mark_unhealthy', sandbox_id: a.id, worker_id: 'w1', reason: 'worker_unreachable' }]);
    // w1 has one sandbox, w2 none: w2 is chosen anyway by count; make w1 the emptier one to prove the skip.
    await sandboxes.destroy(a.id, ANONYMOUS).catch(() => undefined);
    const b = await sandboxes.spawn({});
    expect(b.worker_id).toBe('w2');
    const c = await sandboxes.spawn({});
    expect(c.worker_id).toBe('w2');
    // w1 heartbeats again: it takes spawns again.
    clock.ms += 1000;
    await store.upsertWorker(worker('w1', { last_heartbeat: clock.now().toISOString() }));
    expect((await sandboxes.spawn({})).worker_id).toBe('w1');
  });

  it('GET refreshes from the worker: a vanished runtime is destroyed (404) with its lease released', async () => {
    const rec = await sandboxes.spawn({});
    remote.status = 'missing';
    await expect(sandboxes.refresh(rec.id, ANONYMOUS)).rejects.toMatchObject({ code: 'not_found' });
    expect(await store.getLease(rec.id)).toBeNull();
    expect(events.find((e) => e.type === 'sandbox.destroyed' && e.sandbox_id === rec.id)?.data).toEqual({ reason: 'runtime_lost' });
  });
});
