import type { CommandSpec } from '../spec.js';
import { snapshotColumns } from './snapshot.js';

const NAME = { name: 'name', description: 'snapshot name', required: true } as const;

const ls: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list snapshots (the default)',
  run: list,
};

const get: CommandSpec = {
  name: 'get',
  summary: 'show a snapshot',
  args: [NAME],
  async run(ctx, opts: { name: string }) {
    const s = await ctx.client.getSnapshot(opts.name, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.table(snapshotColumns(), [s]);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  aliases: ['delete'],
  summary: 'delete a snapshot (sandboxes started from it keep running)',
  args: [NAME],
  async run(ctx, opts: { name: string }) {
    const r = await ctx.client.deleteSnapshot(opts.name, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`deleted snapshot ${opts.name}`);
    return 0;
  },
};

async function list(ctx: Parameters<NonNullable<CommandSpec['run']>>[0]): Promise<number> {
  const items = await ctx.client.snapshots({ signal: ctx.signal });
  if (ctx.out.json) ctx.out.printJson(items);
  else if (items.length === 0) ctx.out.note('no snapshots (make one with sbx snapshot ID NAME)');
  else ctx.out.table(snapshotColumns(), items);
  return 0;
}

/** `sbx snapshots` (DESIGN.md §10): list, get, rm. */
export const snapshotsCommand: CommandSpec = {
  name: 'snapshots',
  summary: 'snapshots of sandboxes: list (default), get, rm',
  examples: ['sbx snapshots', 'sbx snapshots rm base', 'sbx snapshots --json'],
  subcommands: [ls, get, rm],
  run: list,
};
