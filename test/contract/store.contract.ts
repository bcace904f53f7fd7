/**
 * The Store contract (src/core/ports.ts), run against every adapter. Each test gets a fresh,
 * migrated store from the factory; time is passed explicitly, never waited for.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import { auditContract } from './store-audit.contract.js';
import { at, ids, sandbox, template, type ContractContext, type StoreFactory, type StoreHarness, when } from './store-fixtures.js';
import { leaseContract } from './store-leases.contract.js';
import { processContract } from './store-processes.contract.js';
import { warmContract } from './store-warm.contract.js';
import { secretsContract } from './store-secrets.contract.js';
import { poolUidContract } from './store-pool.contract.js';
import { registryContract } from './store-registry.contract.js';
import { snapshotVolumeContract } from './store-snapvol.contract.js';

export type { StoreFactory, StoreHarness } from './store-fixtures.js';

export interface StoreContractOptions {
  /** When set, the suite is skipped and the reason is shown in its title. */
  skipReason?: string;
}

/** Registers the shared Store contract suite for one adapter. */
export function runStoreContract(name: string, factory: StoreFactory, options: StoreContractOptions = {}): void {
  const skip = options.skipReason !== undefined;
  const title = skip ? `${name} store contract (skipped: ${options.skipReason})` : `${name} store contract`;
  describe.skipIf(skip)(title, () => {
    const ctx = {} as ContractContext;
    let harness: StoreHarness | undefined;

    beforeEach(async () => {
      harness = await factory();
      ctx.harness = harness;
      ctx.store = harness.store;
      await ctx.store.migrate();
    });

    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    lifecycleContract(ctx);
    sandboxContract(ctx);
    templateContract(ctx);
    registryContract(ctx);
    leaseContract(ctx);
    auditContract(ctx);
    processContract(ctx);
    warmContract(ctx);
    secretsContract(ctx);
    poolUidContract(ctx);
    snapshotVolumeContract(ctx);
  });
}

function lifecycleContract(ctx: ContractContext): void {
  describe('lifecycle and meta', () => {
    it('names its driver and answers ping with a latency', async () => {
      expect(ctx.store.driver).toMatch(/^[a-z]+$/);
      const latency = await ctx.store.ping();
      expect(typeof latency).toBe('number');
      expect(Number.isFinite(latency)).toBe(true);
      expect(latency).toBeGreaterThanOrEqual(0);
    });

    it('gets, sets and overwrites meta values', async () => {
      expect(await ctx.store.getMeta('installation_id')).toBeNull();
      await ctx.store.setMeta('installation_id', 'abc123');
      expect(await ctx.store.getMeta('installation_id')).toBe('abc123');
      await ctx.store.setMeta('installation_id', 'def456');
      expect(await ctx.store.getMeta('installation_id')).toBe('def456');
      await ctx.store.setMeta('empty', '');
      expect(await ctx.store.getMeta('empty')).toBe('');
      expect(await ctx.store.getMeta('schema_version')).toMatch(/^[1-9][0-9]*$/);
    });

    it('claims a meta value once: the first writer wins, later claims get its value', async () => {
      expect(await ctx.store.claimMeta('installation_id', 'first')).toBe('first');
      expect(await ctx.store.claimMeta('installation_id', 'second')).toBe('first');
      expect(await ctx.store.getMeta('installation_id')).toBe('first');
      const many = await Promise.all(Array.from({ length: 8 }, (_, i) => ctx.store.claimMeta('race', `v${i}`)));
      expect(new Set(many).size).toBe(1);
      expect(await ctx.store.getMeta('race')).toBe(many[0]);
    });

    it('migrates again without harm', async () => {
      await ctx.store.insertSandbox(sandbox('sb-keep'));
      await ctx.store.setMeta('k', 'v');
      await ctx.store.migrate();
      await ctx.store.migrate();
      expect((await ctx.store.getSandbox('sb-keep'))?.id).toBe('sb-keep');
      expect(await ctx.store.getMeta('k')).toBe('v');
    });

    it('keeps every kind of data across close and reopen', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-persist', { metadata: { team: 'core' }, owner_id: 'alice' }));
      await s.createTemplate(template('py', { image: 'python:3' }));
      await s.upsertQuota({ owner_id: 'alice', max_sandboxes: 2, max_ttl_ms: 0, max_exec_timeout_ms: 0, updated_at: at(0) });
      await s.upsertWorker({
        id: 'w1',
        hostname: 'h1',
        status: 'online',
        providers: ['mock'],
        capabilities: ['spawn'],
        capacity: { max_sandboxes: 4, max_sandboxes_per_owner: 2 },
        last_heartbeat: at(0),
        updated_at: at(0),
      });
      const lease = await s.acquireLease('sb-persist', 'w1', 60_000, when(0));
      await s.setMeta('installation_id', 'inst-1');
      await s.close();
      await s.close(); // idempotent

      const reopened = await ctx.harness.reopen();
      await reopened.migrate();
      expect(await reopened.getSandbox('sb-persist')).toEqual(sandbox('sb-persist', { metadata: { team: 'core' }, owner_id: 'alice' }));
      expect((await reopened.getTemplate('py'))?.image).toBe('python:3');
      expect((await reopened.getQuota('alice'))?.max_sandboxes).toBe(2);
      expect((await reopened.getWorker('w1'))?.capacity).toEqual({ max_sandboxes: 4, max_sandboxes_per_owner: 2 });
      expect(await reopened.getLease('sb-persist')).toEqual(lease);
      expect(await reopened.getMeta('installation_id')).toBe('inst-1');
    });
  });
}

function sandboxContract(ctx: ContractContext): void {
  describe('sandboxes', () => {
    it('round-trips every field, including metadata and nulls', async () => {
      const full = sandbox('sb-full', {
        state: 'unhealthy',
        provider: 'docker',
        memory_mb: 2048,
        vcpus: 4,
        created_at: '2025-02-03T04:05:06.789Z',
        updated_at: '2025-02-03T04:05:07.001Z',
        expires_at: '2025-02-03T05:05:06.789Z',
        metadata: { team: 'infra', 'with space': 'ünïcødé ✓', empty: '', json: '{"a":[1]}' },
        owner_id: 'alice',
        worker_id: 'worker-7',
        runtime_id: 'c0ffee',
        template: 'python',
        env: { FOO: 'bar', MULTI: 'line\none ✓' },
        access_token_seed: '00112233445566778899aabbccddeeff',
      });
      await ctx.store.insertSandbox(full);
      await ctx.store.insertSandbox(sandbox('sb-bare'));
      expect(await ctx.store.getSandbox('sb-full')).toEqual(full);
      expect(await ctx.store.getSandbox('sb-bare')).toEqual(sandbox('sb-bare'));
      expect(await ctx.store.getSandbox('sb-unknown')).toBeNull();
    });

    it('refuses a duplicate id with conflict', async () => {
      await ctx.store.insertSandbox(sandbox('sb-dup'));
      const err = await ctx.store.insertSandbox(sandbox('sb-dup', { image: 'other' })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('conflict');
      expect((await ctx.store.getSandbox('sb-dup'))?.image).toBe('sbx-test/busybox:latest');
    });

    it('applies a patch, returns the new record and persists it', async () => {
      await ctx.store.insertSandbox(sandbox('sb-1', { owner_id: 'alice', metadata: { a: '1' } }));
      const updated = await ctx.store.updateSandbox('sb-1', {
        state: 'destroyed',
        updated_at: at(5000),
        runtime_id: 'rt-9',
        metadata: { b: '2' },
        owner_id: null,
      });
      const expected = sandbox('sb-1', {
        state: 'destroyed',
        updated_at: at(5000),
        runtime_id: 'rt-9',
        metadata: { b: '2' },
        owner_id: null,
      });
      expect(updated).toEqual(expected);
      expect(await ctx.store.getSandbox('sb-1')).toEqual(expected);

      const extended = await ctx.store.updateSandbox('sb-1', { expires_at: at(99_000), worker_id: 'w2', template: 't' });
      expect(extended).toEqual({ ...expected, expires_at: at(99_000), worker_id: 'w2', template: 't' });
      expect(await ctx.store.updateSandbox('sb-1', {})).toEqual(extended);
    });

    it('returns null when patching an unknown id', async () => {
      expect(await ctx.store.updateSandbox('sb-nope', { state: 'destroyed' })).toBeNull();
      expect(await ctx.store.updateSandbox('sb-nope', {})).toBeNull();
      expect(await ctx.store.getSandbox('sb-nope')).toBeNull();
    });

    it('lists by created_at then id, with each filter alone and combined', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-d', { created_at: at(2000), owner_id: 'alice', worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-a', { created_at: at(1000), state: 'destroyed', owner_id: 'bob', worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-c', { created_at: at(0), owner_id: 'alice' }));
      await s.insertSandbox(sandbox('sb-b', { created_at: at(0), state: 'unhealthy', worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-e', { created_at: at(3000), state: 'expired', owner_id: 'bob' }));

      expect(ids(await s.listSandboxes())).toEqual(['sb-b', 'sb-c', 'sb-a', 'sb-d', 'sb-e']);
      expect(ids(await s.listSandboxes({}))).toEqual(['sb-b', 'sb-c', 'sb-a', 'sb-d', 'sb-e']);
      expect(ids(await s.listSandboxes({ states: [] }))).toEqual(['sb-b', 'sb-c', 'sb-a', 'sb-d', 'sb-e']);
      expect(ids(await s.listSandboxes({ states: ['running'] }))).toEqual(['sb-c', 'sb-d']);
      expect(ids(await s.listSandboxes({ states: ['running', 'unhealthy', 'expired'] }))).toEqual(['sb-b', 'sb-c', 'sb-d', 'sb-e']);
      expect(ids(await s.listSandboxes({ states: ['error'] }))).toEqual([]);
      expect(ids(await s.listSandboxes({ owner_id: 'alice' }))).toEqual(['sb-c', 'sb-d']);
      expect(ids(await s.listSandboxes({ owner_id: 'nobody' }))).toEqual([]);
      expect(ids(await s.listSandboxes({ worker_id: 'w1' }))).toEqual(['sb-b', 'sb-a', 'sb-d']);
      expect(ids(await s.listSandboxes({ worker_id: 'local' }))).toEqual(['sb-c', 'sb-e']);
      expect(ids(await s.listSandboxes({ states: ['running'], worker_id: 'w1' }))).toEqual(['sb-d']);
      expect(ids(await s.listSandboxes({ owner_id: 'bob', states: ['destroyed', 'expired'], worker_id: 'local' }))).toEqual(['sb-e']);
      const [first] = await s.listSandboxes({ owner_id: 'alice' });
      expect(first).toEqual(sandbox('sb-c', { created_at: at(0), owner_id: 'alice' }));
    });

    it('sorts ids by byte order, the same on every driver', async () => {
      const names = ['sb-b', 'sb-B', 'sb-a', 'sb-_', 'sb-A', 'sb-1', 'sb-a1'];
      for (const id of names) await ctx.store.insertSandbox(sandbox(id));
      expect(ids(await ctx.store.listSandboxes())).toEqual([...names].sort());
    });

    it('id_prefix matches literally (no LIKE wildcards), limit caps the sorted list', async () => {
      const s = ctx.store;
      // Inserted out of order: the list is by created_at, then id.
      const rows: Array<[string, number]> = [
        ['sb-ab1', 3000],
        ['sb-ab2', 1000],
        ['sb-a_1', 2000],
        ['sb-a%1', 2000],
        ['sb-axb', 0],
        ['sb-b', 0],
        ['sb-ab', 4000],
        ['sb-é1', 500],
      ];
      for (const [id, t] of rows) await s.insertSandbox(sandbox(id, { created_at: at(t) }));
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-ab' }))).toEqual(['sb-ab2', 'sb-ab1', 'sb-ab']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-a' }))).toEqual(['sb-axb', 'sb-ab2', 'sb-a%1', 'sb-a_1', 'sb-ab1', 'sb-ab']);
      // `_` and `%` are themselves, not one or any character.
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-a_' }))).toEqual(['sb-a_1']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-a%' }))).toEqual(['sb-a%1']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-é' }))).toEqual(['sb-é1']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-ab1' }))).toEqual(['sb-ab1']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-ab1x' }))).toEqual([]);
      expect(ids(await s.listSandboxes({ id_prefix: 'SB-' }))).toEqual([]);
      // An empty prefix filters nothing.
      expect(await s.listSandboxes({ id_prefix: '' })).toHaveLength(rows.length);
      expect(ids(await s.listSandboxes({ limit: 2 }))).toEqual(['sb-axb', 'sb-b']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-a', limit: 2 }))).toEqual(['sb-axb', 'sb-ab2']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-ab', limit: 1000 }))).toEqual(['sb-ab2', 'sb-ab1', 'sb-ab']);
      expect(ids(await s.listSandboxes({ id_prefix: 'sb-ab', states: ['destroyed'], limit: 2 }))).toEqual([]);
    });

    it('applies ownership and expiry in the query, so a limited page is full', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-1', { created_at: at(0), owner_id: 'alice' }));
      await s.insertSandbox(sandbox('sb-2', { created_at: at(1), owner_id: 'bob' }));
      await s.insertSandbox(sandbox('sb-3', { created_at: at(2), owner_id: null }));
      await s.insertSandbox(sandbox('sb-4', { created_at: at(3), owner_id: 'key/abc' }));
      await s.insertSandbox(sandbox('sb-5', { created_at: at(4), owner_id: 'ip/def' }));
      await s.insertSandbox(sandbox('sb-6', { created_at: at(5), owner_id: 'bob', expires_at: at(10) }));
      await s.insertSandbox(sandbox('sb-7', { created_at: at(6), owner_id: 'bob' }));
      expect(ids(await s.listSandboxes({ visible_to: { owner_id: 'bob' } }))).toEqual(['sb-2', 'sb-3', 'sb-4', 'sb-5', 'sb-6', 'sb-7']);
      expect(ids(await s.listSandboxes({ visible_to: { owner_id: 'alice' } }))).toEqual(['sb-1', 'sb-3', 'sb-4', 'sb-5']);
      expect(ids(await s.listSandboxes({ visible_to: { owner_id: null } }))).toEqual(['sb-3', 'sb-4', 'sb-5']);
      // Bob's first page of 2 skips alice's sandbox instead of coming back short.
      expect(ids(await s.listSandboxes({ visible_to: { owner_id: 'bob' }, limit: 2 }))).toEqual(['sb-2', 'sb-3']);
      expect(ids(await s.listSandboxes({ visible_to: { owner_id: 'bob' }, expires_after: at(10), id_prefix: 'sb-', limit: 5 }))).toEqual([
        'sb-2',
        'sb-3',
        'sb-4',
        'sb-5',
        'sb-7',
      ]);
    });

    it('pages by keyset (created_at, id) after a position, even one whose row is gone', async () => {
      const s = ctx.store;
      for (const [id, t] of [
        ['sb-a', 0],
        ['sb-b', 1],
        ['sb-c', 1],
        ['sb-d', 2],
        ['sb-e', 3],
      ] as const)
        await s.insertSandbox(sandbox(id, { created_at: at(t) }));
      expect(ids(await s.listSandboxes({ limit: 2 }))).toEqual(['sb-a', 'sb-b']);
      expect(ids(await s.listSandboxes({ limit: 2, after: { created_at: at(1), id: 'sb-b' } }))).toEqual(['sb-c', 'sb-d']);
      // Same created_at, ids after the position only; a position that names no row still works.
      expect(ids(await s.listSandboxes({ limit: 10, after: { created_at: at(1), id: 'sb-bb' } }))).toEqual(['sb-c', 'sb-d', 'sb-e']);
      expect(ids(await s.listSandboxes({ limit: 10, after: { created_at: at(3), id: 'sb-e' } }))).toEqual([]);
    });

    it('counts live sandboxes by index: total, earliest expiry, per owner and per worker', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-1', { owner_id: 'alice', expires_at: at(50), worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-2', { owner_id: 'alice', expires_at: at(20), worker_id: 'w2' }));
      await s.insertSandbox(sandbox('sb-3', { owner_id: 'bob', state: 'unhealthy', expires_at: at(90), worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-4', { owner_id: 'bob', state: 'error', expires_at: at(90) }));
      await s.insertSandbox(sandbox('sb-5', { owner_id: 'bob', state: 'destroyed', expires_at: at(90) }));
      await s.insertSandbox(sandbox('sb-6', { owner_id: 'carol', expires_at: at(5) }));
      expect(await s.countLive(at(10), ['alice', 'bob', 'dave'])).toEqual({
        total: 3,
        next_expiry: at(20),
        by_owner: { alice: 2, bob: 1 },
      });
      expect(await s.countLive(at(60), [])).toEqual({ total: 1, next_expiry: at(90), by_owner: {} });
      expect(await s.countLive(at(100), ['bob'])).toEqual({ total: 0, next_expiry: null, by_owner: {} });
      expect(await s.countLiveByWorker(at(10), 'alice')).toEqual({ by_worker: { w1: 2, w2: 1 }, by_worker_for_owner: { w1: 1, w2: 1 } });
      expect(await s.countLiveByWorker(at(30), null)).toEqual({ by_worker: { w1: 2 }, by_worker_for_owner: {} });
      const tally = (await s.tallySandboxes(at(30))).sort((a, b) =>
        `${a.state}${a.worker_id}${a.past_ttl}`.localeCompare(`${b.state}${b.worker_id}${b.past_ttl}`),
      );
      expect(tally).toEqual([
        { state: 'destroyed', provider: 'mock', worker_id: 'local', past_ttl: false, n: 1 },
        { state: 'error', provider: 'mock', worker_id: 'local', past_ttl: false, n: 1 },
        { state: 'running', provider: 'mock', worker_id: 'local', past_ttl: true, n: 1 },
        { state: 'running', provider: 'mock', worker_id: 'w1', past_ttl: false, n: 1 },
        { state: 'running', provider: 'mock', worker_id: 'w2', past_ttl: true, n: 1 },
        { state: 'unhealthy', provider: 'mock', worker_id: 'w1', past_ttl: false, n: 1 },
      ]);
    });

    it('keeps forked_from and fork; lists the sandboxes of one fork image in any state, oldest first', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-fk-parent'));
      await s.insertSandbox(sandbox('sb-fk-b', { created_at: at(2), forked_from: 'sb-fk-parent', fork: 'fork-abc' }));
      await s.insertSandbox(sandbox('sb-fk-a', { created_at: at(1), forked_from: 'sb-fk-parent', fork: 'fork-abc', state: 'destroyed' }));
      await s.insertSandbox(sandbox('sb-fk-other', { forked_from: 'sb-fk-parent', fork: 'fork-def' }));
      expect(await s.getSandbox('sb-fk-b')).toMatchObject({ forked_from: 'sb-fk-parent', fork: 'fork-abc' });
      const parent = await s.getSandbox('sb-fk-parent');
      expect(parent).not.toHaveProperty('forked_from');
      expect(parent).not.toHaveProperty('fork');
      expect(ids(await s.sandboxesOfFork('fork-abc'))).toEqual(['sb-fk-a', 'sb-fk-b']);
      expect((await s.sandboxesOfFork('fork-abc')).map((r) => r.state)).toEqual(['destroyed', 'running']);
      expect(await s.sandboxesOfFork('fork-none')).toEqual([]);
    });

    it('counts the sandboxes a list shows per provider (running, unhealthy, error; expiry ahead) without listing them', async () => {
      const s = ctx.store;
      await s.insertSandbox(sandbox('sb-p1', { provider: 'docker', expires_at: at(50) }));
      await s.insertSandbox(sandbox('sb-p2', { provider: 'docker', state: 'unhealthy', expires_at: at(50), worker_id: 'w1' }));
      await s.insertSandbox(sandbox('sb-p3', { provider: 'docker', state: 'error', expires_at: at(20) }));
      await s.insertSandbox(sandbox('sb-p4', { provider: 'docker', state: 'destroyed', expires_at: at(90) }));
      await s.insertSandbox(sandbox('sb-p5', { provider: 'docker', state: 'expired', expires_at: at(90) }));
      await s.insertSandbox(sandbox('sb-p6', { provider: 'proot', expires_at: at(90) }));
      await s.insertSandbox(sandbox('sb-p7', { provider: 'docker', expires_at: at(5) }));
      expect(await s.countOfProvider(at(10), 'docker')).toBe(3);
      expect(await s.countOfProvider(at(30), 'docker')).toBe(2);
      expect(await s.countOfProvider(at(10), 'proot')).toBe(1);
      expect(await s.countOfProvider(at(10), 'mock')).toBe(0);
      expect(await s.countOfProvider(at(60), 'docker')).toBe(0);
    });

    it('stores idempotency keys: first claim wins, completion, conditional drops, pruning', async () => {
      const s = ctx.store;
      const rec = { owner_key: 'alice', key: 'k', request_hash: 'h1', created_at: at(0) };
      expect(await s.claimIdempotency(rec)).toBe(true);
      expect(await s.claimIdempotency({ ...rec, request_hash: 'h2', created_at: at(1) })).toBe(false);
      expect(await s.claimIdempotency({ ...rec, owner_key: '' })).toBe(true);
      expect(await s.getIdempotency('alice', 'k')).toEqual({ ...rec, sandbox_id: null });
      expect(await s.getIdempotency('bob', 'k')).toBeNull();
      // A drop names the claim it saw: a newer claim with the same key is not touched.
      expect(await s.dropIdempotency('alice', 'k', at(5), true)).toBe(false);
      await s.completeIdempotency('alice', 'k', at(0), 'sb-1');
      expect((await s.getIdempotency('alice', 'k'))?.sandbox_id).toBe('sb-1');
      expect(await s.dropIdempotency('alice', 'k', at(0), true)).toBe(false); // it has its sandbox
      expect(await s.pruneIdempotency(at(0))).toBe(0);
      expect(await s.pruneIdempotency(at(1))).toBe(2);
      expect(await s.getIdempotency('alice', 'k')).toBeNull();
    });

    it('keeps the live counts equal to a count of the rows through every kind of change', async () => {
      const s = ctx.store;
      const live = new Set(['running', 'unhealthy']);
      const owners = ['o1', 'o2', 'o3'];
      // Brute force from the rows themselves: what the counters must always agree with.
      const expected = async (now: string, owner: string | null) => {
        const rows = (await s.listSandboxes()).filter((r) => live.has(r.state) && r.expires_at > now);
        const byOwner: Record<string, number> = {};
        const byWorker: Record<string, number> = {};
        const byWorkerOwner: Record<string, number> = {};
        for (const r of rows) {
          if (r.owner_id && owners.includes(r.owner_id)) byOwner[r.owner_id] = (byOwner[r.owner_id] ?? 0) + 1;
          byWorker[r.worker_id] = (byWorker[r.worker_id] ?? 0) + 1;
          if (owner !== null && r.owner_id === owner) byWorkerOwner[r.worker_id] = (byWorkerOwner[r.worker_id] ?? 0) + 1;
        }
        return { total: rows.length, by_owner: byOwner, by_worker: byWorker, by_worker_for_owner: byWorkerOwner };
      };
      const check = async (now: string) => {
        for (const owner of [null, 'o1', 'o2']) {
          const want = await expected(now, owner);
          const c = await s.countLive(now, owners);
          const w = await s.countLiveByWorker(now, owner);
          expect({ total: c.total, by_owner: c.by_owner, by_worker: w.by_worker, by_worker_for_owner: w.by_worker_for_owner }).toEqual(
            want,
          );
        }
      };
      for (let i = 0; i < 12; i++) {
        await s.insertSandbox(
          sandbox(`sb-${i}`, {
            owner_id: i % 4 === 3 ? null : owners[i % 3]!,
            worker_id: `w${i % 2}`,
            state: i % 5 === 4 ? 'unhealthy' : 'running',
            expires_at: at(10 + i * 10),
          }),
        );
      }
      await check(at(0));
      await check(at(55)); // some past their TTL, still in a live state
      await s.updateSandbox('sb-0', { state: 'destroyed' });
      await s.updateSandbox('sb-4', { state: 'running' }); // unhealthy → running: no change
      await s.updateSandbox('sb-1', { state: 'error' });
      await s.updateSandbox('sb-1', { state: 'running' }); // back into a live state
      await s.updateSandbox('sb-2', { worker_id: 'w9' });
      await s.updateSandbox('sb-5', { owner_id: 'o3' });
      await s.updateSandbox('sb-6', { owner_id: null });
      await s.updateSandbox('sb-7', { expires_at: at(500), updated_at: at(1) }); // not a count change
      await s.updateSandbox('sb-8', { state: 'expired' });
      await check(at(0));
      await check(at(75));
    });
  });
}

function templateContract(ctx: ContractContext): void {
  describe('templates', () => {
    it('creates, reads and round-trips nulls and metadata', async () => {
      const full = template('python', {
        image: 'python:3.12',
        memory_mb: 1024,
        vcpus: 2,
        ttl: '1h30m',
        provider: 'docker',
        metadata: { lang: 'py', note: 'ñ' },
        created_at: at(1),
        updated_at: at(2),
      });
      await ctx.store.createTemplate(full);
      await ctx.store.createTemplate(template('bare'));
      expect(await ctx.store.getTemplate('python')).toEqual(full);
      expect(await ctx.store.getTemplate('bare')).toEqual(template('bare'));
      expect(await ctx.store.getTemplate('missing')).toBeNull();
    });

    it('refuses a duplicate name with conflict and keeps the original', async () => {
      await ctx.store.createTemplate(template('x', { image: 'first' }));
      const err = await ctx.store.createTemplate(template('x', { image: 'second' })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('conflict');
      expect((err as SbxError).message).toBe('template "x" already exists');
      expect((await ctx.store.getTemplate('x'))?.image).toBe('first');
    });

    it('lists sorted by name (byte order)', async () => {
      const names = ['node', 'Alpha', 'alpha', 'a-b', 'a_b', 'beta', 'B'];
      for (const n of names) await ctx.store.createTemplate(template(n));
      expect((await ctx.store.listTemplates()).map((t) => t.name)).toEqual([...names].sort());
    });

    it('updates every field but name and created_at; null when unknown', async () => {
      await ctx.store.createTemplate(template('t', { image: 'old', memory_mb: 256, metadata: { a: '1' }, created_at: at(0) }));
      const updated = await ctx.store.updateTemplate('t', {
        image: null,
        memory_mb: 512,
        vcpus: 2,
        ttl: '10m',
        provider: 'proot',
        metadata: { b: '2' },
        updated_at: at(9000),
      });
      const expected = template('t', {
        image: null,
        memory_mb: 512,
        vcpus: 2,
        ttl: '10m',
        provider: 'proot',
        metadata: { b: '2' },
        created_at: at(0),
        updated_at: at(9000),
      });
      expect(updated).toEqual(expected);
      expect(await ctx.store.getTemplate('t')).toEqual(expected);
      expect(await ctx.store.updateTemplate('nope', { ...expected })).toBeNull();
      expect(await ctx.store.getTemplate('nope')).toBeNull();
    });

    it('deletes once', async () => {
      await ctx.store.createTemplate(template('gone'));
      expect(await ctx.store.deleteTemplate('gone')).toBe(true);
      expect(await ctx.store.getTemplate('gone')).toBeNull();
      expect(await ctx.store.deleteTemplate('gone')).toBe(false);
      await ctx.store.createTemplate(template('gone', { image: 'again' }));
      expect((await ctx.store.getTemplate('gone'))?.image).toBe('again');
    });
  });
}
