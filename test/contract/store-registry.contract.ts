import { describe, expect, it } from 'vitest';
import type { WorkerRecord } from '../../src/core/ports/index.js';
import { at, type ContractContext } from './store-fixtures.js';

const THIRTY_DAYS_MS = 30 * 24 * 3600_000; // beyond 32-bit integers

function worker(id: string, overrides: Partial<WorkerRecord> = {}): Omit<WorkerRecord, 'created_at'> & { created_at?: string } {
  return {
    id,
    hostname: `${id}.example`,
    status: 'online',
    providers: ['docker', 'mock'],
    capabilities: ['spawn', 'exec', 'files'],
    capacity: { max_sandboxes: 10, max_sandboxes_per_owner: 3 },
    last_heartbeat: at(0),
    updated_at: at(0),
    ...overrides,
  };
}

/** Owner quotas and the worker registry. */
export function registryContract(ctx: ContractContext): void {
  describe('owner quotas', () => {
    it('inserts with created_at defaulting to updated_at and round-trips large values', async () => {
      const stored = await ctx.store.upsertQuota({
        owner_id: 'alice',
        max_sandboxes: 3,
        max_ttl_ms: THIRTY_DAYS_MS,
        max_exec_timeout_ms: 600_000,
        updated_at: at(1000),
      });
      const expected = {
        owner_id: 'alice',
        max_sandboxes: 3,
        max_ttl_ms: THIRTY_DAYS_MS,
        max_exec_timeout_ms: 600_000,
        created_at: at(1000),
        updated_at: at(1000),
      };
      expect(stored).toEqual(expected);
      expect(await ctx.store.getQuota('alice')).toEqual(expected);
      expect(await ctx.store.getQuota('bob')).toBeNull();
    });

    it('keeps created_at and moves updated_at on update', async () => {
      await ctx.store.upsertQuota({
        owner_id: 'alice',
        max_sandboxes: 3,
        max_ttl_ms: 0,
        max_exec_timeout_ms: 0,
        created_at: at(0),
        updated_at: at(0),
      });
      const stored = await ctx.store.upsertQuota({
        owner_id: 'alice',
        max_sandboxes: 7,
        max_ttl_ms: 3600_000,
        max_exec_timeout_ms: 60_000,
        created_at: at(50_000),
        updated_at: at(60_000),
      });
      const expected = {
        owner_id: 'alice',
        max_sandboxes: 7,
        max_ttl_ms: 3600_000,
        max_exec_timeout_ms: 60_000,
        created_at: at(0),
        updated_at: at(60_000),
      };
      expect(stored).toEqual(expected);
      expect(await ctx.store.getQuota('alice')).toEqual(expected);
    });

    it('lists sorted by owner_id and deletes once', async () => {
      for (const owner of ['zed', 'Bob', 'alice', 'bob']) {
        await ctx.store.upsertQuota({ owner_id: owner, max_sandboxes: 1, max_ttl_ms: 0, max_exec_timeout_ms: 0, updated_at: at(0) });
      }
      expect((await ctx.store.listQuotas()).map((q) => q.owner_id)).toEqual(['Bob', 'alice', 'bob', 'zed']);
      expect(await ctx.store.deleteQuota('bob')).toBe(true);
      expect(await ctx.store.deleteQuota('bob')).toBe(false);
      expect(await ctx.store.getQuota('bob')).toBeNull();
      expect((await ctx.store.listQuotas()).map((q) => q.owner_id)).toEqual(['Bob', 'alice', 'zed']);
    });
  });

  describe('workers', () => {
    it('round-trips providers, capabilities and capacity JSON', async () => {
      const input = worker('w-remote', {
        capacity: {
          max_sandboxes: 50,
          max_sandboxes_per_owner: 5,
          rpc_url: 'https://w.example:7424/rpc',
          preview_domain: 'preview.example',
        },
        providers: [],
        capabilities: ['api', 'single_node'],
        last_heartbeat: at(500),
        updated_at: at(500),
      });
      const stored = await ctx.store.upsertWorker(input);
      const expected: WorkerRecord = { ...input, created_at: at(500) } as WorkerRecord;
      expect(stored).toEqual(expected);
      expect(await ctx.store.getWorker('w-remote')).toEqual(expected);
      expect(await ctx.store.getWorker('w-unknown')).toBeNull();
    });

    it("round-trips the egress gateway's counts with the secret injections (DESIGN §10, §15); older rows have none", async () => {
      const counted = await ctx.store.upsertWorker(worker('w-egress', { egress: { allowed: 9, denied: 2, injections: 4 } }));
      expect(counted.egress).toEqual({ allowed: 9, denied: 2, injections: 4 });
      expect((await ctx.store.getWorker('w-egress'))?.egress).toEqual({ allowed: 9, denied: 2, injections: 4 });
      await ctx.store.upsertWorker(worker('w-egress', { egress: { allowed: 10, denied: 2 } }));
      expect((await ctx.store.getWorker('w-egress'))?.egress).toEqual({ allowed: 10, denied: 2 });
      await ctx.store.deleteWorker('w-egress');
    });

    it('keeps created_at on a later heartbeat and replaces the rest', async () => {
      await ctx.store.upsertWorker(worker('w1', { created_at: at(0) }));
      const later = await ctx.store.upsertWorker(
        worker('w1', {
          hostname: 'renamed',
          status: 'draining',
          providers: ['proot'],
          capabilities: ['exec'],
          capacity: { max_sandboxes: 1, max_sandboxes_per_owner: 1 },
          last_heartbeat: at(30_000),
          updated_at: at(30_000),
          created_at: at(29_000),
        }),
      );
      const expected: WorkerRecord = {
        id: 'w1',
        hostname: 'renamed',
        status: 'draining',
        providers: ['proot'],
        capabilities: ['exec'],
        capacity: { max_sandboxes: 1, max_sandboxes_per_owner: 1 },
        last_heartbeat: at(30_000),
        created_at: at(0),
        updated_at: at(30_000),
      };
      expect(later).toEqual(expected);
      expect(await ctx.store.getWorker('w1')).toEqual(expected);
    });

    it('lists sorted by id and deletes once', async () => {
      for (const id of ['w2', 'local', 'W1', 'w10', 'w1']) await ctx.store.upsertWorker(worker(id));
      expect((await ctx.store.listWorkers()).map((w) => w.id)).toEqual(['W1', 'local', 'w1', 'w10', 'w2']);
      expect(await ctx.store.deleteWorker('w10')).toBe(true);
      expect(await ctx.store.deleteWorker('w10')).toBe(false);
      expect(await ctx.store.getWorker('w10')).toBeNull();
      expect((await ctx.store.listWorkers()).map((w) => w.id)).toEqual(['W1', 'local', 'w1', 'w2']);
    });
  });
}
