import type { CommandSpec } from '../spec.js';

/** `sbx pool`: the shared pool's runtimes and workspaces (spec 2.11, DESIGN.md §8). */
export const poolCommand: CommandSpec = {
  name: 'pool',
  summary: 'show the shared pool (pool mode): runtimes and workspaces in use',
  examples: ['sbx pool', 'sbx pool --json'],
  async run(ctx) {
    const p = await ctx.client.poolStatus({ signal: ctx.signal });
    if (ctx.out.json) {
      ctx.out.printJson(p);
      return 0;
    }
    if (!p.enabled) {
      ctx.out.line('pool mode is off on this server (pool.enabled: false)');
      return 0;
    }
    ctx.out.fields([
      ['runtimes', `${p.vms ?? 0} of ${p.max_vms ?? 0}`],
      ['workspaces', `${p.total_users ?? 0} (at most ${p.max_users_per_vm ?? 0} per runtime)`],
    ]);
    if (p.runtimes && p.runtimes.length > 0) {
      ctx.out.line();
      ctx.out.table(
        [
          { header: 'RUNTIME', value: (r: { runtime_id: string; users: number }) => r.runtime_id.slice(0, 20) },
          { header: 'WORKSPACES', value: (r: { runtime_id: string; users: number }) => String(r.users) },
        ],
        p.runtimes,
      );
    }
    return 0;
  },
};
