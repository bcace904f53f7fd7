import type { Worker } from '../../../contracts/system.js';
import type { CliContext } from '../context.js';
import { relativeTime } from '../output/format.js';
import type { CommandSpec } from '../spec.js';

function printWorker(ctx: CliContext, w: Worker): void {
  if (ctx.out.json) return ctx.out.printJson(w);
  ctx.out.fields([
    ['id', w.id],
    ['hostname', w.hostname],
    ['status', w.stale ? `${w.status} (stale)` : w.status],
    ['providers', w.providers.join(', ') || '-'],
    ['capabilities', w.capabilities.join(', ') || '-'],
    ['max sandboxes', String(w.capacity.max_sandboxes)],
    ['max per owner', String(w.capacity.max_sandboxes_per_owner)],
    ...(w.capacity.rpc_url ? [['rpc url', w.capacity.rpc_url] as const] : []),
    ...(w.capacity.preview_domain ? [['preview domain', w.capacity.preview_domain] as const] : []),
    ['last heartbeat', `${w.last_heartbeat} (${relativeTime(w.last_heartbeat)})`],
  ]);
}

async function list(ctx: CliContext): Promise<number> {
  const { out, client } = ctx;
  const items = await client.workers.list({ signal: ctx.signal });
  if (out.json) out.printJson(items);
  else
    out.table(
      [
        { header: 'ID', value: (w) => w.id },
        {
          header: 'STATUS',
          value: (w) => (w.stale ? `${w.status} (stale)` : w.status),
          style: (t, w) => (w.stale ? out.c.yellow(t) : w.status === 'online' ? out.c.green(t) : t),
        },
        { header: 'HOSTNAME', value: (w) => w.hostname },
        { header: 'PROVIDERS', value: (w) => w.providers.join(',') || '-' },
        { header: 'RPC URL', value: (w) => w.capacity.rpc_url ?? '-' },
        { header: 'HEARTBEAT', value: (w) => relativeTime(w.last_heartbeat) },
      ],
      items,
    );
  return 0;
}

const idArg = [{ name: 'id', description: 'worker id', required: true }] as const;

export const workersCommand: CommandSpec = {
  name: 'workers',
  summary: 'list, show, drain or delete registered workers',
  description: '`sbx workers` lists them and `sbx workers ID` shows one, as `list` and `get` do.',
  args: [{ name: 'id', description: 'worker id for details' }],
  examples: ['sbx workers', 'sbx workers get w1', 'sbx workers drain w1', 'sbx workers delete w1'],
  subcommands: [
    { name: 'list', summary: 'list registered workers', run: (ctx) => list(ctx) },
    {
      name: 'get',
      summary: 'show one worker',
      args: idArg,
      async run(ctx, opts: { id: string }) {
        printWorker(ctx, await ctx.client.workers.get(opts.id, { signal: ctx.signal }));
        return 0;
      },
    },
    {
      name: 'drain',
      summary: 'drain a worker: it refuses new spawns, its sandboxes keep answering (admin)',
      args: idArg,
      async run(ctx, opts: { id: string }) {
        const w = await ctx.client.workers.drain(opts.id, { signal: ctx.signal });
        if (ctx.out.json) ctx.out.printJson(w);
        else ctx.out.line(`worker ${w.id} is ${w.status}: no new sandboxes go to it; its running sandboxes keep answering`);
        return 0;
      },
    },
    {
      name: 'delete',
      summary: 'remove a worker from the registry (admin)',
      args: idArg,
      async run(ctx, opts: { id: string }) {
        const r = await ctx.client.workers.remove(opts.id, { signal: ctx.signal });
        if (ctx.out.json) ctx.out.printJson(r);
        else ctx.out.line(`deleted worker ${opts.id}`);
        return 0;
      },
    },
  ],
  async run(ctx, opts: { id?: string }) {
    if (!opts.id) return list(ctx);
    printWorker(ctx, await ctx.client.workers.get(opts.id, { signal: ctx.signal }));
    return 0;
  },
};
