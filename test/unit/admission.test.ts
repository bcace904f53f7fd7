import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { systemClock } from '../../src/adapters/system/clock-ids.js';
import { Admission, type AdmissionTicket } from '../../src/core/admission/admission.js';
import { QuotaService } from '../../src/core/admission/quotas.js';
import { SbxError } from '../../src/core/errors.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { SbxEvent } from '../../src/core/events/kinds.js';
import type { SandboxRecord, Store } from '../../src/core/ports/index.js';
import type { CoreSettings } from '../../src/core/settings.js';

// Unit tier: the waits below run on fake timers that jump to the next timer when nothing else is
// pending, so a 200 ms queue timeout or a 20 ms settle costs no wall time.
beforeAll(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setTimerTickMode('nextTimerAsync');
});
afterAll(() => {
  vi.useRealTimers();
});

/** A last placement as the locator reports it (the scheduler member echoes it). */
const PLACED = {
  selected_worker_id: 'w-7',
  eligible_workers: 3,
  owner_quotas: 0,
  placements: 4,
  placement_p50_ms: 1.5,
  placement_p99_ms: 3.25,
};

type Defaults = CoreSettings['defaults'];

function settingsWith(d: Partial<Defaults>): CoreSettings {
  return {
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
      spawn_queue_timeout_ms: 2_000,
      max_spawn_queue: 10,
      ...d,
    },
    limits: { max_file_bytes: 1 << 20, max_exec_output_bytes: 1 << 20 },
    enforce_ownership: false,
    pool: { enabled: false, max_vms: 4, max_users_per_vm: 8, image: 'img', memory_mb: 64, vcpus: 1, provider: 'mock' },
  };
}

let store: Store;
let bus: EventBus;
let events: SbxEvent[];
let admission: Admission | undefined;
let seq = 0;

beforeEach(async () => {
  store = await createSqliteStore({ path: ':memory:' });
  await store.migrate();
  bus = new EventBus(systemClock);
  events = [];
  bus.subscribe((e) => events.push(e));
});

afterEach(async () => {
  admission?.close();
  admission = undefined;
  await store.close();
});

function make(d: Partial<Defaults>): Admission {
  admission = new Admission(store, settingsWith(d), systemClock, bus);
  return admission;
}

/** What SandboxService does after admission: store the sandbox, then release the ticket. */
async function store_(ticket: AdmissionTicket, owner: string | null, ttlMs = 60_000): Promise<string> {
  const now = new Date();
  const id = `sb-t${++seq}`;
  const rec: SandboxRecord = {
    id,
    state: 'running',
    provider: 'mock',
    image: 'img',
    memory_mb: 1,
    vcpus: 1,
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
    expires_at: new Date(now.getTime() + ttlMs).toISOString(),
    metadata: {},
    owner_id: owner,
    worker_id: 'local',
    runtime_id: `rt-${id}`,
    template: null,
  };
  await store.insertSandbox(rec);
  ticket.release();
  return id;
}

async function spawn(a: Admission, owner: string | null = null, ttlMs = 60_000): Promise<string> {
  return store_(await a.admit({ owner_id: owner, ttl_ms: ttlMs }), owner, ttlMs);
}

async function destroy(id: string, owner: string | null = null): Promise<void> {
  await store.updateSandbox(id, { state: 'destroyed' });
  bus.publish({ type: 'sandbox.destroyed', sandbox_id: id, owner_id: owner ?? undefined, data: { reason: 'test' } });
}

async function rejection(p: Promise<unknown>): Promise<SbxError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SbxError);
    return err as SbxError;
  }
  throw new Error('expected a rejection');
}

const kinds = (prefix: string) => events.filter((e) => e.type.startsWith(prefix)).map((e) => e.type);

describe('admission decisions', () => {
  it('reject mode: global capacity is unavailable, the owner limit and TTL are resource_limit', async () => {
    const a = make({ max_sandboxes: 2, max_sandboxes_per_owner: 1 });
    await spawn(a, 'alice');
    const owner = await rejection(a.admit({ owner_id: 'alice', ttl_ms: 1000 }));
    expect(owner.code).toBe('resource_limit');
    expect(owner.details?.reason).toBe('max_sandboxes_per_owner');
    await spawn(a, 'bob');
    const full = await rejection(a.admit({ owner_id: 'carol', ttl_ms: 1000 }));
    expect(full.code).toBe('unavailable');
    expect(full.details?.reason).toBe('max_sandboxes');
    const ttl = await rejection(a.admit({ owner_id: 'carol', ttl_ms: 2 * 3_600_000 }));
    expect(ttl.code).toBe('resource_limit');
    expect(ttl.details?.reason).toBe('max_ttl');
    const limits = events.filter((e) => e.type === 'resource.limit').map((e) => [e.data?.reason, e.data?.owner]);
    expect(limits).toEqual([
      ['max_sandboxes_per_owner', 'alice'],
      ['max_sandboxes', 'carol'],
      ['max_ttl', 'carol'],
    ]);
  });

  it('a TTL denial is never queueable, a capacity denial is in queue mode', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    await spawn(a);
    const cap = await a.decide({ owner_id: null, ttl_ms: 1000 });
    expect(cap).toMatchObject({
      allowed: false,
      queueable: true,
      reason: 'max_sandboxes',
      active_sandboxes: 1,
      max_sandboxes: 1,
      max_ttl: '1h0m0s',
    });
    const ttl = await a.decide({ owner_id: null, ttl_ms: 7_200_000 });
    expect(ttl).toMatchObject({ allowed: false, queueable: false, reason: 'max_ttl' });
    const err = await rejection(a.admit({ owner_id: null, ttl_ms: 7_200_000 }));
    expect(err.details?.reason).toBe('max_ttl');
    expect(a.stats(PLACED).spawn_queue_depth).toBe(0);
  });

  it('quotas override count, TTL and exec timeout; 0 inherits the global default', async () => {
    const a = make({ max_sandboxes_per_owner: 1, max_ttl_ms: 3_600_000, max_exec_timeout_ms: 600_000 });
    const now = new Date().toISOString();
    await store.upsertQuota({ owner_id: 'big', max_sandboxes: 3, max_ttl_ms: 7_200_000, max_exec_timeout_ms: 0, updated_at: now });
    await store.upsertQuota({ owner_id: 'zero', max_sandboxes: 0, max_ttl_ms: 0, max_exec_timeout_ms: 60_000, updated_at: now });
    expect(await a.limitsFor('big')).toEqual({
      max_sandboxes: 0,
      max_owner_sandboxes: 3,
      max_ttl_ms: 7_200_000,
      max_exec_timeout_ms: 600_000,
      quota_configured: true,
    });
    expect(await a.limitsFor('zero')).toEqual({
      max_sandboxes: 0,
      max_owner_sandboxes: 1,
      max_ttl_ms: 3_600_000,
      max_exec_timeout_ms: 60_000,
      quota_configured: true,
    });
    expect((await a.limitsFor('nobody')).quota_configured).toBe(false);
    for (let i = 0; i < 3; i++) await spawn(a, 'big', 7_000_000);
    expect((await rejection(a.admit({ owner_id: 'big', ttl_ms: 1000 }))).details?.reason).toBe('max_sandboxes_per_owner');
  });

  it('serializes concurrent admits: 20 at once against max 3 grant exactly 3', async () => {
    const a = make({ max_sandboxes: 3 });
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => a.admit({ owner_id: null, ttl_ms: 1000 })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const denied = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(denied).toHaveLength(17);
    expect(denied.every((r) => (r.reason as SbxError).code === 'unavailable')).toBe(true);
    // Granted but not yet stored slots count as active.
    expect((await a.countActive(null)).total).toBe(3);
  });

  it('only active sandboxes count: destroyed and expired ones do not', async () => {
    const a = make({ max_sandboxes: 2 });
    const id = await spawn(a);
    await spawn(a, null, 50);
    await destroy(id);
    await new Promise((r) => setTimeout(r, 80));
    expect((await a.countActive(null)).total).toBe(0);
    await spawn(a);
  });
});

describe('spawn queue', () => {
  it('a waiter resumes when a sandbox is destroyed; events arrive queued → dequeued', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    const first = await spawn(a, 'alice');
    const waiting = a.admit({ owner_id: 'bob', ttl_ms: 1000 });
    await new Promise((r) => setTimeout(r, 30));
    expect(a.stats(PLACED).spawn_queue_depth).toBe(1);
    const t0 = Date.now();
    await destroy(first, 'alice');
    const ticket = await waiting;
    expect(Date.now() - t0).toBeLessThan(500);
    await store_(ticket, 'bob');
    expect(kinds('spawn.')).toEqual(['spawn.queued', 'spawn.dequeued']);
    const queued = events.find((e) => e.type === 'spawn.queued')!;
    expect(queued.owner_id).toBe('bob');
    expect(queued.data).toMatchObject({ owner: 'bob', reason: 'max_sandboxes', queue_depth: 1 });
    const s = a.stats(PLACED);
    expect(s).toMatchObject({
      spawn_queue_depth: 0,
      spawn_queued_total: 1,
      spawn_dequeued_total: 1,
      spawn_queue_timeouts: 0,
      spawn_queue_wait_count: 1,
    });
    expect(s.spawn_queue_wait_max_ms).toBeGreaterThanOrEqual(20);
    expect(s.spawn_queue_wait_max).toMatch(/^\d+ms$/);
  });

  it('times out with a typed resource_limit and counts the wait', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue', spawn_queue_timeout_ms: 200 });
    await spawn(a);
    const t0 = Date.now();
    const err = await rejection(a.admit({ owner_id: 'bob', ttl_ms: 1000 }));
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(190);
    expect(took).toBeLessThan(1000);
    expect(err.code).toBe('resource_limit');
    expect(err.details).toMatchObject({ reason: 'spawn_queue_timeout', spawn_queue_timeout: '200ms' });
    expect(kinds('spawn.')).toEqual(['spawn.queued', 'spawn.queue_timeout']);
    expect(events.filter((e) => e.type === 'resource.limit').map((e) => e.data?.reason)).toEqual(['max_sandboxes', 'spawn_queue_timeout']);
    const s = a.stats(PLACED);
    expect(s).toMatchObject({
      spawn_queue_depth: 0,
      spawn_queued_total: 1,
      spawn_dequeued_total: 0,
      spawn_queue_timeouts: 1,
      spawn_queue_wait_count: 1,
    });
    expect(s.spawn_queue_wait_total_ms).toBeGreaterThanOrEqual(190);
  });

  it('a full queue fails at once', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue', max_spawn_queue: 1 });
    await spawn(a);
    const waiting = a.admit({ owner_id: null, ttl_ms: 1000 });
    const t0 = Date.now();
    const err = await rejection(a.admit({ owner_id: null, ttl_ms: 1000 }));
    expect(Date.now() - t0).toBeLessThan(200);
    expect(err.code).toBe('resource_limit');
    expect(err.details).toMatchObject({ reason: 'spawn_queue_full', queue_depth: 1, max_spawn_queue: 1 });
    a.close();
    expect((await rejection(waiting)).code).toBe('unavailable');
  });

  it('serves waiters first-in first-out and never lets a newcomer overtake', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    const first = await spawn(a);
    const order: string[] = [];
    const b = a.admit({ owner_id: 'b', ttl_ms: 1000 }).then((t) => (order.push('b'), t));
    await new Promise((r) => setTimeout(r, 10));
    const c = a.admit({ owner_id: 'c', ttl_ms: 1000 }).then((t) => (order.push('c'), t));
    await new Promise((r) => setTimeout(r, 10));
    await destroy(first);
    const tb = await b;
    expect(order).toEqual(['b']);
    const second = await store_(tb, 'b');
    await destroy(second);
    await store_(await c, 'c');
    expect(order).toEqual(['b', 'c']);
  });

  it('an owner-limited waiter does not block other owners', async () => {
    const a = make({ max_sandboxes: 10, max_sandboxes_per_owner: 1, spawn_overflow: 'queue' });
    await spawn(a, 'x');
    const waiting = a.admit({ owner_id: 'x', ttl_ms: 1000 });
    await spawn(a, 'y');
    expect(a.stats(PLACED).spawn_queue_depth).toBe(1);
    a.close();
    await rejection(waiting);
  });

  it('a quota raise releases a waiting owner', async () => {
    const a = make({ max_sandboxes_per_owner: 1, spawn_overflow: 'queue' });
    const quotas = new QuotaService({ store, bus, clock: systemClock, admission: a });
    await spawn(a, 'x');
    const waiting = a.admit({ owner_id: 'x', ttl_ms: 1000 });
    await new Promise((r) => setTimeout(r, 20));
    await quotas.save('x', { max_sandboxes: 2 });
    await store_(await waiting, 'x');
    expect((await a.countActive('x')).owner).toBe(2);
  });

  it('expiry opens capacity without any event', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    await spawn(a, null, 150);
    const t0 = Date.now();
    await store_(await a.admit({ owner_id: null, ttl_ms: 1000 }), null);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('a failed spawn gives its slot to a waiter', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    const held = await a.admit({ owner_id: null, ttl_ms: 1000 });
    const waiting = a.admit({ owner_id: null, ttl_ms: 1000 });
    await new Promise((r) => setTimeout(r, 10));
    held.release(); // the provider failed: nothing was stored
    await store_(await waiting, null);
  });

  it('a cancelled waiter leaves the queue', async () => {
    const a = make({ max_sandboxes: 1, spawn_overflow: 'queue' });
    await spawn(a);
    const ac = new AbortController();
    const waiting = a.admit({ owner_id: null, ttl_ms: 1000 }, ac.signal);
    await new Promise((r) => setTimeout(r, 10));
    expect(a.stats(PLACED).spawn_queue_depth).toBe(1);
    ac.abort();
    await rejection(waiting);
    expect(a.stats(PLACED).spawn_queue_depth).toBe(0);
    expect(a.stats(PLACED).spawn_queue_wait_count).toBe(0);
  });

  it('reports scheduler and limits shaped like spec 2.15', async () => {
    const a = make({
      max_sandboxes: 5,
      max_sandboxes_per_owner: 2,
      spawn_overflow: 'queue',
      spawn_queue_timeout_ms: 30_000,
      max_spawn_queue: 7,
      default_exec_timeout_ms: 0,
    });
    expect(a.limitsSnapshot()).toEqual({
      max_sandboxes: 5,
      max_sandboxes_per_owner: 2,
      default_exec_timeout: '0s',
      max_exec_timeout: '10m0s',
      max_ttl: '1h0m0s',
      spawn_overflow: 'queue',
      spawn_queue_timeout: '30s',
      max_spawn_queue: 7,
    });
    expect(a.stats(PLACED)).toEqual({
      spawn_overflow: 'queue',
      spawn_queue_depth: 0,
      max_spawn_queue: 7,
      spawn_queue_timeout: '30s',
      admission_control: true,
      spawn_queued_total: 0,
      spawn_dequeued_total: 0,
      spawn_queue_timeouts: 0,
      spawn_queue_wait_count: 0,
      spawn_queue_wait_total: '0s',
      spawn_queue_wait_max: '0s',
      spawn_queue_wait_avg: '0s',
      spawn_queue_wait_total_ms: 0,
      spawn_queue_wait_max_ms: 0,
      spawn_queue_wait_avg_ms: 0,
      worker_id: 'local',
      selected_worker_id: 'w-7',
      eligible_workers: 3,
      placements: 4,
      placement_p50_ms: 1.5,
      placement_p99_ms: 3.25,
    });
  });
});

describe('quota service', () => {
  it('validates owner ids, counts and durations', async () => {
    const quotas = new QuotaService({ store, bus, clock: systemClock, admission: make({}) });
    const bad: Array<[string, Record<string, unknown>]> = [
      ['a b', {}],
      ['a/b', {}],
      ['a\\b', {}],
      ['x'.repeat(129), {}],
      ['  ', {}],
      ['ok', { max_sandboxes: -1 }],
      ['ok', { max_sandboxes: 1.5 }],
      ['ok', { max_ttl: 'soon' }],
      ['ok', { max_ttl: '500ms' }],
      ['ok', { max_ttl: '1.5s' }],
      ['ok', { max_exec_timeout: '1500ms' }],
      ['ok', { max_exec_timeout: '-1s' }],
      ['ok', { max_sandboxes: 2_147_483_648 }],
      ['ok', { max_sandboxes: 1e20 }],
      ['ok', { max_ttl: '100000000000h' }],
      ['ok', { max_exec_timeout: '9999999999999h' }],
      ['a\u0085b', {}],
      ['a\u2028b', {}],
    ];
    for (const [owner, body] of bad) {
      const err = await rejection(quotas.save(owner, body));
      expect(err.code, `${owner} ${JSON.stringify(body)}`).toBe('bad_request');
    }
    expect(await store.listQuotas()).toEqual([]);
    expect(events.filter((e) => e.type.startsWith('quota.'))).toEqual([]);
    expect((await rejection(quotas.save('ok', { max_ttl: '100000000000h' }))).message).toMatch(/^max_ttl: .*too long/);
    // The largest count the stores hold is accepted and read back exactly.
    const max = await quotas.save('ok', { max_sandboxes: 2_147_483_647, max_ttl: '8760h' });
    expect(max).toMatchObject({ max_sandboxes: 2_147_483_647, max_ttl: '8760h0m0s' });
    expect(await quotas.get('ok')).toEqual(max);
  });

  it('upserts keeping created_at, renders durations, summarises and deletes', async () => {
    const quotas = new QuotaService({ store, bus, clock: systemClock, admission: make({ max_sandboxes_per_owner: 4 }) });
    const q1 = await quotas.save(' alice ', { max_sandboxes: 2, max_ttl: '1h', max_exec_timeout: '0s' });
    expect(q1).toMatchObject({ owner_id: 'alice', max_sandboxes: 2, max_ttl: '1h0m0s', max_exec_timeout: '0s' });
    await new Promise((r) => setTimeout(r, 5));
    const q2 = await quotas.save('alice', { max_exec_timeout: '90s' });
    expect(q2).toMatchObject({ max_sandboxes: 0, max_ttl: '0s', max_exec_timeout: '1m30s', created_at: q1.created_at });
    expect(q2.updated_at > q1.updated_at).toBe(true);
    await quotas.save('bob', {});
    expect(await quotas.summary()).toEqual({ total: 2, with_max_sandboxes: 0, with_max_ttl: 0, with_max_exec_timeout: 1 });
    expect(await quotas.usage('alice')).toEqual({
      owner_id: 'alice',
      active_sandboxes: 0,
      max_sandboxes: 4,
      max_ttl: '1h0m0s',
      max_exec_timeout: '1m30s',
      quota_configured: true,
    });
    await quotas.remove('alice');
    expect((await rejection(quotas.remove('alice'))).code).toBe('not_found');
    expect((await rejection(quotas.get('alice'))).code).toBe('not_found');
    expect(events.filter((e) => e.type.startsWith('quota.')).map((e) => [e.type, e.owner_id])).toEqual([
      ['quota.saved', 'alice'],
      ['quota.saved', 'alice'],
      ['quota.saved', 'bob'],
      ['quota.deleted', 'alice'],
    ]);
  });
});
