import { describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import { at, audit, ids, when, type ContractContext } from './store-fixtures.js';

async function seed(ctx: ContractContext): Promise<void> {
  const records = [
    audit('a3', { created_at: at(2000), method: 'DELETE', path: '/api/v1/admin/quotas/bob', status: 404 }),
    audit('a1', { created_at: at(0), method: 'GET', path: '/api/v1/admin/audit', status: 200 }),
    audit('a5', { created_at: at(3000), actor: 'bob', method: 'GET', path: '/api/v1/admin%/x', status: 200 }),
    audit('a2', { created_at: at(1000), actor: 'alice', method: 'PUT', path: '/api/v1/admin/quotas/alice', status: 200 }),
    audit('a4', { created_at: at(2000), method: 'delete', path: '/api/v1/admin/workers/w1', status: 204 }),
  ];
  for (const r of records) await ctx.store.insertAudit(r);
}

/** Admin audit history: filters, order, limits, pruning. */
export function auditContract(ctx: ContractContext): void {
  describe('admin audit', () => {
    it('round-trips a record', async () => {
      const rec = audit('x1', {
        created_at: '2025-03-04T05:06:07.089Z',
        actor: 'key:ops',
        method: 'PUT',
        path: '/api/v1/admin/quotas/ü',
        status: 201,
        duration_ms: 12.5,
        request_id: 'req-abc',
        remote_addr: '::1',
        user_agent: 'curl/8 ✓',
      });
      await ctx.store.insertAudit(rec);
      expect(await ctx.store.listAudit()).toEqual([rec]);
    });

    it('lists newest first, ties by id descending', async () => {
      await seed(ctx);
      expect(ids(await ctx.store.listAudit())).toEqual(['a5', 'a4', 'a3', 'a2', 'a1']);
      expect(ids(await ctx.store.listAudit({}))).toEqual(['a5', 'a4', 'a3', 'a2', 'a1']);
    });

    it('filters by actor, method, status and path prefix', async () => {
      await seed(ctx);
      const s = ctx.store;
      expect(ids(await s.listAudit({ actor: 'admin' }))).toEqual(['a4', 'a3', 'a1']);
      expect(ids(await s.listAudit({ actor: 'nobody' }))).toEqual([]);
      expect(ids(await s.listAudit({ method: 'DELETE' }))).toEqual(['a4', 'a3']);
      expect(ids(await s.listAudit({ method: 'put' }))).toEqual(['a2']);
      expect(ids(await s.listAudit({ status: 200 }))).toEqual(['a5', 'a2', 'a1']);
      expect(ids(await s.listAudit({ status: 404 }))).toEqual(['a3']);
      expect(ids(await s.listAudit({ path: '/api/v1/admin/quotas' }))).toEqual(['a3', 'a2']);
      expect(ids(await s.listAudit({ path: '/api/v1/admin/quotas/alice' }))).toEqual(['a2']);
      // A prefix, not a pattern: `%` and `_` are literal characters.
      expect(ids(await s.listAudit({ path: '/api/v1/admin%' }))).toEqual(['a5']);
      expect(ids(await s.listAudit({ path: '/api/v1/admin_' }))).toEqual([]);
      expect(ids(await s.listAudit({ actor: 'admin', status: 404 }))).toEqual(['a3']);
      expect(ids(await s.listAudit({ actor: 'admin', method: 'GET', path: '/api/v1/admin/audit', status: 200 }))).toEqual(['a1']);
    });

    it('filters by actor prefix, literally, so a credential kind finds every user under it', async () => {
      const actors = ['api-key', 'api-key:dave', 'api-key:dan', 'admin-key:dave', 'anonymous', 'api%key:x', 'ääkey:ü'];
      for (const [i, actor] of actors.entries()) await ctx.store.insertAudit(audit(`p${i}`, { created_at: at(i * 1000), actor }));
      const s = ctx.store;
      expect(ids(await s.listAudit({ actor: 'api-key' }))).toEqual(['p2', 'p1', 'p0']);
      expect(ids(await s.listAudit({ actor: 'api-key:' }))).toEqual(['p2', 'p1']);
      expect(ids(await s.listAudit({ actor: 'api-key:dave' }))).toEqual(['p1']);
      expect(ids(await s.listAudit({ actor: 'api-key:da' }))).toEqual(['p2', 'p1']);
      expect(ids(await s.listAudit({ actor: 'admin-key' }))).toEqual(['p3']);
      expect(ids(await s.listAudit({ actor: 'api-key:dave-x' }))).toEqual([]);
      // `%` and `_` are literal, not LIKE wildcards; lengths count characters, not bytes.
      expect(ids(await s.listAudit({ actor: 'api%' }))).toEqual(['p5']);
      expect(ids(await s.listAudit({ actor: 'api_key' }))).toEqual([]);
      expect(ids(await s.listAudit({ actor: 'ääkey' }))).toEqual(['p6']);
      expect(ids(await s.listAudit({ actor: '' }))).toHaveLength(actors.length);
    });

    it('filters by inclusive since and until, in any ISO form', async () => {
      await seed(ctx);
      const s = ctx.store;
      expect(ids(await s.listAudit({ since: at(2000) }))).toEqual(['a5', 'a4', 'a3']);
      expect(ids(await s.listAudit({ until: at(1000) }))).toEqual(['a2', 'a1']);
      expect(ids(await s.listAudit({ since: at(1000), until: at(2000) }))).toEqual(['a4', 'a3', 'a2']);
      expect(ids(await s.listAudit({ since: at(1001), until: at(1999) }))).toEqual([]);
      expect(ids(await s.listAudit({ since: '2025-01-01T00:00:02Z' }))).toEqual(['a5', 'a4', 'a3']);
      expect(ids(await s.listAudit({ until: '2025-01-01T01:00:01.000+01:00' }))).toEqual(['a2', 'a1']);
      expect(ids(await s.listAudit({ since: at(1000), actor: 'admin' }))).toEqual(['a4', 'a3']);
      const err = await s.listAudit({ since: 'yesterday-ish' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('bad_request');
    });

    it('limits: explicit, default 100, capped at 10000', async () => {
      await seed(ctx);
      expect(ids(await ctx.store.listAudit({ limit: 2 }))).toEqual(['a5', 'a4']);
      expect(ids(await ctx.store.listAudit({ limit: 2, actor: 'admin' }))).toEqual(['a4', 'a3']);
      for (let i = 0; i < 100; i++) {
        await ctx.store.insertAudit(audit(`b${String(i).padStart(3, '0')}`, { created_at: at(10_000 + i) }));
      }
      const page = await ctx.store.listAudit();
      expect(page).toHaveLength(100);
      expect(page[0]!.id).toBe('b099');
      expect(page[99]!.id).toBe('b000');
      expect(await ctx.store.listAudit({ limit: 0 })).toHaveLength(100);
      expect(await ctx.store.listAudit({ limit: 20_000 })).toHaveLength(105);
    });

    it('prunes records older than the cut-off and reports how many', async () => {
      await seed(ctx);
      expect(await ctx.store.pruneAudit(when(2000))).toBe(2);
      expect(ids(await ctx.store.listAudit())).toEqual(['a5', 'a4', 'a3']);
      expect(await ctx.store.pruneAudit(when(2000))).toBe(0);
      expect(await ctx.store.pruneAudit(when(3001))).toBe(3);
      expect(await ctx.store.listAudit()).toEqual([]);
    });
  });
}
