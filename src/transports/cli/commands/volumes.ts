import type { Volume } from '../../../client/types.js';
import { bytes, relativeTime } from '../output/format.js';
import type { Column } from '../output/table.js';
import type { CommandSpec } from '../spec.js';

const NAME = { name: 'name', description: 'volume name: [a-z0-9][a-z0-9_.-]{0,63}', required: true } as const;

function columns(): Column<Volume>[] {
  return [
    { header: 'NAME', value: (v) => v.name },
    { header: 'PROVIDER', value: (v) => v.provider },
    { header: 'SIZE', value: (v) => (v.size_bytes === null ? '-' : bytes(v.size_bytes)) },
    { header: 'CREATED', value: (v) => relativeTime(v.created_at) },
  ];
}

async function list(ctx: Parameters<NonNullable<CommandSpec['run']>>[0]): Promise<number> {
  const items = await ctx.client.volumes.list({ signal: ctx.signal });
  if (ctx.out.json) ctx.out.printJson(items);
  else if (items.length === 0) ctx.out.note('no volumes (make one with sbx volumes create NAME)');
  else ctx.out.table(columns(), items);
  return 0;
}

const ls: CommandSpec = { name: 'ls', aliases: ['list'], summary: 'list volumes (the default)', run: list };

const create: CommandSpec = {
  name: 'create',
  summary: 'create an empty volume (fails if the name exists)',
  args: [NAME],
  options: [
    { flags: '--provider <name>', description: 'provider that holds it (default: the server default); sandboxes mounting it run there' },
  ],
  examples: ['sbx volumes create data', 'sbx spawn --volume data:/data'],
  async run(ctx, opts: { name: string; provider?: string }) {
    const v = await ctx.client.volumes.create(opts.name, {
      signal: ctx.signal,
      ...(opts.provider !== undefined ? { provider: opts.provider } : {}),
    });
    if (ctx.out.json) ctx.out.printJson(v);
    else ctx.out.line(`created volume ${v.name} on ${v.provider}`);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  aliases: ['delete'],
  summary: 'delete a volume and its data (refused while a sandbox mounts it)',
  args: [NAME],
  async run(ctx, opts: { name: string }) {
    const r = await ctx.client.volumes.remove(opts.name, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`deleted volume ${opts.name}`);
    return 0;
  },
};

/** `sbx volumes` (DESIGN.md §10): list, create, rm. */
export const volumesCommand: CommandSpec = {
  name: 'volumes',
  aliases: ['volume'],
  summary: 'named volumes that outlive sandboxes: list (default), create, rm',
  examples: ['sbx volumes', 'sbx volumes create data', 'sbx spawn --volume data:/data', 'sbx volumes rm data'],
  subcommands: [ls, create, rm],
  run: list,
};
