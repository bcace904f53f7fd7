import { describe, expect, it } from 'vitest';
import type { ContractContext } from './store-fixtures.js';

/** Pool uid counters (migration 12): one runtime never gets one offset twice, however many ask at once. */
export function poolUidContract(ctx: ContractContext): void {
  describe('pool uid counters', () => {
    it('counts per runtime from 0, each offset once under concurrency, and survives a reopen; forgetting restarts it', async () => {
      expect(await ctx.store.takePoolUid('rt-a')).toBe(0);
      expect(await ctx.store.takePoolUid('rt-a')).toBe(1);
      expect(await ctx.store.takePoolUid('rt-b')).toBe(0);
      const got = await Promise.all(Array.from({ length: 20 }, () => ctx.store.takePoolUid('rt-a')));
      expect([...got].sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      const again = await ctx.harness.reopen();
      expect(await again.takePoolUid('rt-a')).toBe(22);
      await again.forgetPoolRuntime('rt-a');
      await again.forgetPoolRuntime('rt-a');
      expect(await again.takePoolUid('rt-a')).toBe(0);
      expect(await again.takePoolUid('rt-b')).toBe(1);
    });
  });
}
