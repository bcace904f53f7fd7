import { describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import type { SnapshotRecord, VolumeRecord } from '../../src/core/ports/index.js';
import { at, sandbox, template, type ContractContext } from './store-fixtures.js';

const snap = (name: string, over: Partial<SnapshotRecord> = {}): SnapshotRecord => ({
  name,
  provider: 'docker',
  image: `sbx-snapshot/${name}:latest`,
  kernel: null,
  size_bytes: 4_400_000_000,
  created_at: at(1),
  owner_id: null,
  sandbox_id: 'sb-1',
  worker_id: 'local',
  ...over,
});
const vol = (name: string, over: Partial<VolumeRecord> = {}): VolumeRecord => ({
  name,
  provider: 'mock',
  created_at: at(2),
  owner_id: null,
  ...over,
});

/** Snapshots and volumes (DESIGN.md §10): kept until deleted, names unique, lists by name. */
export function snapshotVolumeContract(ctx: ContractContext): void {
  describe('snapshots and volumes', () => {
    it('stores a snapshot once, reads it back exactly, lists by name and deletes once', async () => {
      const a = snap('b.one', { owner_id: 'alice', kernel: 'vmlinux-6.1' });
      await ctx.store.insertSnapshot(a);
      await ctx.store.insertSnapshot(snap('a_1'));
      expect(await ctx.store.getSnapshot('b.one')).toEqual(a);
      expect(await ctx.store.getSnapshot('nope')).toBeNull();
      const err = await ctx.store.insertSnapshot(snap('b.one', { image: 'other' })).catch((e: unknown) => e);
      expect((err as SbxError).code).toBe('conflict');
      expect((await ctx.store.getSnapshot('b.one'))?.image).toBe('sbx-snapshot/b.one:latest');
      expect((await ctx.store.listSnapshots()).map((s) => s.name)).toEqual(['a_1', 'b.one']);
      expect(await ctx.store.deleteSnapshot('b.one')).toBe(true);
      expect(await ctx.store.deleteSnapshot('b.one')).toBe(false);
      expect((await ctx.store.listSnapshots()).map((s) => s.name)).toEqual(['a_1']);
    });

    it('stores volumes, refuses a taken name and keeps them across a reopen', async () => {
      await ctx.store.insertVolume(vol('data', { owner_id: 'bob' }));
      await ctx.store.insertVolume(vol('cache'));
      const err = await ctx.store.insertVolume(vol('data')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('conflict');
      expect(await ctx.store.listVolumes()).toEqual([vol('cache'), vol('data', { owner_id: 'bob' })]);
      const again = await ctx.harness.reopen();
      expect(await again.getVolume('data')).toEqual(vol('data', { owner_id: 'bob' }));
      expect(await again.deleteVolume('data')).toBe(true);
      expect(await again.getVolume('data')).toBeNull();
    });

    it('round-trips the volumes and snapshot of sandboxes and templates, and finds who mounts a volume', async () => {
      const mounts = [
        { name: 'data', mount_path: '/data' },
        { name: 'x_y', mount_path: '/mnt/x' },
      ];
      const s1 = sandbox('sb-1', { volumes: mounts, snapshot: 'base' });
      await ctx.store.insertSandbox(s1);
      await ctx.store.insertSandbox(sandbox('sb-2', { volumes: [{ name: 'xay', mount_path: '/a' }] }));
      await ctx.store.insertSandbox(sandbox('sb-3', { volumes: [{ name: 'data', mount_path: '/d' }], state: 'destroyed' }));
      await ctx.store.insertSandbox(sandbox('sb-4'));
      expect(await ctx.store.getSandbox('sb-1')).toEqual(s1);
      expect((await ctx.store.getSandbox('sb-4'))?.volumes).toBeUndefined();
      expect(await ctx.store.sandboxesMounting('data')).toEqual(['sb-1']);
      // `_` is no wildcard: x_y does not match xay.
      expect(await ctx.store.sandboxesMounting('x_y')).toEqual(['sb-1']);
      expect(await ctx.store.sandboxesMounting('xay')).toEqual(['sb-2']);
      expect(await ctx.store.sandboxesMounting('dat')).toEqual([]);
      await ctx.store.updateSandbox('sb-1', { state: 'destroyed' });
      expect(await ctx.store.sandboxesMounting('data')).toEqual([]);

      const t = template('t', { snapshot: 'base', volumes: mounts });
      await ctx.store.createTemplate(t);
      expect(await ctx.store.getTemplate('t')).toEqual(t);
      const { name: _n, created_at: _c, ...rest } = t;
      const updated = await ctx.store.updateTemplate('t', { ...rest, snapshot: null, volumes: null, updated_at: at(5) });
      expect(updated?.snapshot).toBeUndefined();
      expect(updated?.volumes).toBeUndefined();
    });
  });
}
