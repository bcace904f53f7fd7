import { describe, expect, it } from 'vitest';
import type { ProcessRecord } from '../../src/core/ports/index.js';
import { at, type ContractContext } from './store-fixtures.js';

const proc = (id: string, over: Partial<ProcessRecord> = {}): ProcessRecord => ({
  id,
  sandbox_id: 'sb-1',
  command: 'echo "hi there"',
  args: ['a b', 'ü'],
  mode: 'shell',
  state: 'running',
  exit_code: null,
  started_at: at(0),
  ended_at: null,
  runner: 'detached',
  holder: 'local',
  deadline_at: null,
  ...over,
});

/** Background process records (migration 8). */
export function processContract(ctx: ContractContext): void {
  describe('processes', () => {
    it('round-trips every field, nulls and arrays included', async () => {
      const a = proc('p-a', { deadline_at: at(5000) });
      const b = proc('p-b', {
        mode: 'argv',
        args: [],
        runner: 'attached',
        state: 'exited',
        exit_code: 3,
        ended_at: at(100),
        started_at: at(1),
      });
      await ctx.store.insertProcess(a);
      await ctx.store.insertProcess(b);
      expect(await ctx.store.getProcess('p-a')).toEqual(a);
      expect(await ctx.store.getProcess('p-b')).toEqual(b);
      expect(await ctx.store.getProcess('p-none')).toBeNull();
    });

    it('applies a patch and returns the new record; null for an unknown id', async () => {
      await ctx.store.insertProcess(proc('p-a'));
      const done = await ctx.store.updateProcess('p-a', { state: 'killed', exit_code: null, ended_at: at(9) });
      expect(done).toEqual(proc('p-a', { state: 'killed', ended_at: at(9) }));
      expect(await ctx.store.getProcess('p-a')).toEqual(done);
      expect(await ctx.store.updateProcess('p-x', { state: 'killed' })).toBeNull();
    });

    it('lists by started_at then id, filtered by sandbox, states and holder', async () => {
      await ctx.store.insertProcess(proc('p-3', { started_at: at(2) }));
      await ctx.store.insertProcess(proc('p-1', { started_at: at(2), sandbox_id: 'sb-2', holder: 'r2' }));
      await ctx.store.insertProcess(proc('p-2', { started_at: at(1), state: 'exited', exit_code: 0 }));
      const ids = (rs: ProcessRecord[]) => rs.map((r) => r.id);
      expect(ids(await ctx.store.listProcesses())).toEqual(['p-2', 'p-1', 'p-3']);
      expect(ids(await ctx.store.listProcesses({ sandbox_id: 'sb-1' }))).toEqual(['p-2', 'p-3']);
      expect(ids(await ctx.store.listProcesses({ states: ['running'] }))).toEqual(['p-1', 'p-3']);
      expect(ids(await ctx.store.listProcesses({ states: ['running'], holder: 'local' }))).toEqual(['p-3']);
      expect(await ctx.store.listProcesses({ states: [] })).toEqual([]);
      expect(await ctx.store.deleteProcess('p-1')).toBe(true);
      expect(await ctx.store.deleteProcess('p-1')).toBe(false);
      expect(ids(await ctx.store.listProcesses())).toEqual(['p-2', 'p-3']);
    });
  });
}
