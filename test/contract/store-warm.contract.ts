import { describe, expect, it } from 'vitest';
import type { WarmRecord } from '../../src/core/ports/index.js';
import { at, type ContractContext } from './store-fixtures.js';

const warm = (id: string, over: Partial<WarmRecord> = {}): WarmRecord => ({
  sandbox_id: id,
  shape: '["mock","img",64,1,""]',
  provider: 'mock',
  runtime_id: `rt-${id}`,
  network: null,
  worker_id: 'local',
  created_at: at(0),
  ...over,
});

/** Warm runtimes (migration 9): a claim takes the oldest of its shape, once. */
export function warmContract(ctx: ContractContext): void {
  describe('warm runtimes', () => {
    it('claims the oldest of a shape on a worker, each once; lists and deletes', async () => {
      await ctx.store.insertWarm(warm('sb-b', { created_at: at(2) }));
      await ctx.store.insertWarm(warm('sb-a', { created_at: at(1), network: 'bridge' }));
      await ctx.store.insertWarm(warm('sb-c', { shape: 'other' }));
      await ctx.store.insertWarm(warm('sb-d', { worker_id: 'w2' }));
      expect((await ctx.store.listWarm('local')).map((w) => w.sandbox_id)).toEqual(['sb-a', 'sb-b', 'sb-c']);
      expect((await ctx.store.listWarm()).length).toBe(4);
      expect(await ctx.store.claimWarm(warm('x').shape, 'local')).toEqual(warm('sb-a', { created_at: at(1), network: 'bridge' }));
      expect((await ctx.store.claimWarm(warm('x').shape, 'local'))?.sandbox_id).toBe('sb-b');
      expect(await ctx.store.claimWarm(warm('x').shape, 'local')).toBeNull();
      expect(await ctx.store.deleteWarm('sb-c')).toBe(true);
      expect(await ctx.store.deleteWarm('sb-c')).toBe(false);
      expect((await ctx.store.listWarm()).map((w) => w.sandbox_id)).toEqual(['sb-d']);
    });

    it('concurrent claims never hand out one runtime twice', async () => {
      for (let i = 0; i < 10; i++) await ctx.store.insertWarm(warm(`sb-${i}`, { created_at: at(i) }));
      const got = await Promise.all(Array.from({ length: 25 }, () => ctx.store.claimWarm(warm('x').shape, 'local')));
      const ids = got.filter((g) => g !== null).map((g) => g!.sandbox_id);
      expect(ids.length).toBe(10);
      expect(new Set(ids).size).toBe(10);
      expect(await ctx.store.listWarm()).toEqual([]);
    });
  });
}
