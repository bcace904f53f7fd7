import type { CreateTemplateRequest } from '../../../client/types.js';
import { printSpawned, printTemplate, templateColumns } from '../shared/render.js';
import { OWNER_OPTION, pullHint, RESOURCE_OPTIONS, spawnRequest, templateImageFix, type ResourceFlags } from '../shared/spawn-flags.js';
import type { CommandSpec } from '../spec.js';

const NAME = { name: 'name', description: 'template name', required: true } as const;

type TemplateFlags = ResourceFlags & { warm?: number };

/** Template-only options after the spawn ones. */
const TEMPLATE_OPTIONS = [
  ...RESOURCE_OPTIONS,
  {
    flags: '--warm <count>',
    description: 'keep this many runtimes of its shape ready, so spawns skip the provider start (0-64)',
    kind: 'int' as const,
  },
];

function fields(f: TemplateFlags): Omit<CreateTemplateRequest, 'name'> {
  const { owner_id: _o, ...rest } = spawnRequest(f);
  return f.warm !== undefined ? { ...rest, warm: f.warm } : rest;
}

const ls: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list templates',
  async run(ctx) {
    const items = await ctx.client.templates.list({ signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(items);
    else if (items.length === 0) ctx.out.note('no templates');
    else ctx.out.table(templateColumns(), items);
    return 0;
  },
};

const get: CommandSpec = {
  name: 'get',
  summary: 'show a template',
  args: [NAME],
  async run(ctx, opts: { name: string }) {
    const t = await ctx.client.templates.get(opts.name, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(t);
    else printTemplate(ctx.out, t);
    return 0;
  },
};

const create: CommandSpec = {
  name: 'create',
  summary: 'create a template (fails if the name exists)',
  args: [NAME],
  options: TEMPLATE_OPTIONS,
  examples: ['sbx templates create py --image python:3.12 --memory 512 --ttl 1h', 'sbx templates create fast --image python:3.12 --warm 4'],
  async run(ctx, opts: TemplateFlags & { name: string }) {
    const t = await ctx.client.templates.create({ name: opts.name, ...fields(opts) }, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(t);
    else ctx.out.line(`created template ${t.name}`);
    return 0;
  },
};

const update: CommandSpec = {
  name: 'update',
  summary: 'replace the fields of a template (unset flags are cleared)',
  args: [NAME],
  options: TEMPLATE_OPTIONS,
  async run(ctx, opts: TemplateFlags & { name: string }) {
    const t = await ctx.client.templates.update(opts.name, fields(opts), { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(t);
    else ctx.out.line(`updated template ${t.name}`);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  aliases: ['delete'],
  summary: 'delete a template',
  args: [NAME],
  async run(ctx, opts: { name: string }) {
    const r = await ctx.client.templates.remove(opts.name, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`deleted template ${opts.name}`);
    return 0;
  },
};

const spawn: CommandSpec = {
  name: 'spawn',
  summary: 'spawn a sandbox from a template (prints its id when stdout is not a terminal)',
  args: [NAME],
  options: [
    { flags: '--ttl <duration>', description: 'override the template TTL', kind: 'duration' },
    { flags: '--provider <name>', description: 'override the template provider' },
    { flags: '--meta <key=value>', description: 'extra metadata label (repeatable)', kind: 'kv' },
    OWNER_OPTION,
  ],
  async run(ctx, opts: ResourceFlags & { name: string }) {
    const { image: _i, memory_mb: _m, vcpus: _v, ...overrides } = spawnRequest(opts);
    const s = await pullHint(
      ctx.out.spin(`spawning from template ${opts.name}`, ctx.client.templates.spawn(opts.name, overrides, { signal: ctx.signal })),
      templateImageFix(opts.name),
    );
    printSpawned(ctx.out, s);
    return 0;
  },
};

export const templatesCommand: CommandSpec = {
  name: 'templates',
  aliases: ['template'],
  summary: 'named spawn presets: ls, get, create, update, rm, spawn',
  subcommands: [ls, get, create, update, rm, spawn],
};
