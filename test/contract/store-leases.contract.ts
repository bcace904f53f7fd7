import { describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import { at, when, type ContractContext } from './store-fixtures.js';

const TTL = 60_000;

/** Spec 3.3 lease rules; `now` is a fixed instant advanced by hand. */
export function leaseContract(ctx: ContractContext): void {
  describe('leases', () => {
    it('acquires a fresh lease with generation 1', async () => {
      const lease = await ctx.store.acquireLease('sb-1', 'w1', TTL, when(0));
      expect(lease).toEqual({ resource_id: 'sb-1', holder_id: 'w1', generation: 1, expires_at: at(TTL) });
      expect(await ctx.store.getLease('sb-1')).toEqual(lease);
      expect(await ctx.store.getLease('sb-unknown')).toBeNull();
    });

    it('lets the same holder re-acquire, refuses others until expiry, then hands over', async () => {
      const s = ctx.store;
      await s.acquireLease('sb-1', 'w1', TTL, when(0));
      const again = await s.acquireLease('sb-1', 'w1', TTL, when(10_000));
      expect(again).toEqual({ resource_id: 'sb-1', holder_id: 'w1', generation: 2, expires_at: at(10_000 + TTL) });

      expect(await s.acquireLease('sb-1', 'w2', TTL, when(20_000))).toBeNull();
      expect(await s.acquireLease('sb-1', 'w2', TTL, when(10_000 + TTL - 1))).toBeNull();
      expect(await s.getLease('sb-1')).toEqual(again);

      // Expired from its expires_at instant on.
      const taken = await s.acquireLease('sb-1', 'w2', TTL, when(10_000 + TTL));
      expect(taken).toEqual({ resource_id: 'sb-1', holder_id: 'w2', generation: 3, expires_at: at(10_000 + 2 * TTL) });
      expect(await s.getLease('sb-1')).toEqual(taken);
      expect(await s.acquireLease('sb-1', 'w1', TTL, when(10_000 + TTL + 1))).toBeNull();
    });

    it('renews only for the holder before expiry, saying why not otherwise', async () => {
      const s = ctx.store;
      await s.acquireLease('sb-2', 'w1', TTL, when(0));
      const renewed = await s.renewLease('sb-2', 'w1', TTL, when(30_000));
      expect(renewed).toEqual({
        ok: true,
        lease: { resource_id: 'sb-2', holder_id: 'w1', generation: 2, expires_at: at(30_000 + TTL) },
      });

      expect(await s.renewLease('sb-2', 'w2', TTL, when(40_000))).toEqual({ ok: false, reason: 'held_by_other' });
      expect(await s.getLease('sb-2')).toEqual(renewed.ok ? renewed.lease : null);

      expect(await s.renewLease('sb-2', 'w1', TTL, when(30_000 + TTL))).toEqual({ ok: false, reason: 'expired' });
      expect(await s.renewLease('sb-2', 'w1', TTL, when(10 * TTL))).toEqual({ ok: false, reason: 'expired' });
      expect((await s.getLease('sb-2'))?.generation).toBe(2);

      expect(await s.renewLease('sb-missing', 'w1', TTL, when(0))).toEqual({ ok: false, reason: 'not_found' });
      expect(await s.getLease('sb-missing')).toBeNull();
    });

    it('releases only for the holder', async () => {
      const s = ctx.store;
      const lease = await s.acquireLease('sb-3', 'w1', TTL, when(0));
      expect(await s.releaseLease('sb-3', 'w2')).toBe(false);
      expect(await s.getLease('sb-3')).toEqual(lease);
      expect(await s.releaseLease('sb-3', 'w1')).toBe(true);
      expect(await s.getLease('sb-3')).toBeNull();
      expect(await s.releaseLease('sb-3', 'w1')).toBe(false);
      expect(await s.releaseLease('sb-none', 'w1')).toBe(false);
      // Released: anyone may acquire at once, long before the old expiry.
      expect(await s.acquireLease('sb-3', 'w2', TTL, when(1000))).toEqual({
        resource_id: 'sb-3',
        holder_id: 'w2',
        generation: 1,
        expires_at: at(1000 + TTL),
      });
    });

    it('lists leases sorted by resource_id', async () => {
      for (const id of ['sb-c', 'sb-A', 'sb-a', 'sb-b']) await ctx.store.acquireLease(id, `holder-${id}`, TTL, when(0));
      const leases = await ctx.store.listLeases();
      expect(leases.map((l) => l.resource_id)).toEqual(['sb-A', 'sb-a', 'sb-b', 'sb-c']);
      expect(leases[0]).toEqual({ resource_id: 'sb-A', holder_id: 'holder-sb-A', generation: 1, expires_at: at(TTL) });
    });

    it('rejects a non-positive ttl with bad_request', async () => {
      const err = await ctx.store.acquireLease('sb-4', 'w1', 0, when(0)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('bad_request');
      expect(await ctx.store.getLease('sb-4')).toBeNull();
    });

    it('serializes 20 concurrent acquires by different holders: exactly one wins', async () => {
      const s = ctx.store;
      const holders = Array.from({ length: 20 }, (_, i) => `w-${i}`);
      const first = await Promise.all(holders.map((h) => s.acquireLease('sb-race', h, TTL, when(0))));
      const winners = first.filter((l) => l !== null);
      expect(winners).toHaveLength(1);
      expect(winners[0]).toMatchObject({ resource_id: 'sb-race', generation: 1, expires_at: at(TTL) });
      expect(await s.getLease('sb-race')).toEqual(winners[0]);

      // Once expired, a second race over the existing row again has exactly one winner.
      const late = holders.map((h) => `${h}-late`);
      const second = await Promise.all(late.map((h) => s.acquireLease('sb-race', h, TTL, when(TTL))));
      const winners2 = second.filter((l) => l !== null);
      expect(winners2).toHaveLength(1);
      expect(winners2[0]).toMatchObject({ generation: 2, expires_at: at(2 * TTL) });
      expect(late).toContain(winners2[0]!.holder_id);
      expect(await s.getLease('sb-race')).toEqual(winners2[0]);
    });
  });
}
