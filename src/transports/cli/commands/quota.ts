import type { OwnerQuota, QuotaInput } from '../../../client/types.js';
import { UsageError } from '../errors.js';
import type { Output } from '../output/output.js';
import type { CommandSpec } from '../spec.js';

const OWNER = { name: 'owner', description: 'owner id', required: true } as const;
const inherit = (v: string | number) => (v === 0 || v === '0s' || v === '' ? 'inherit' : String(v));

function printQuota(out: Output, q: OwnerQuota): void {
  out.fields([
    ['owner', q.owner_id],
    ['max sandboxes', inherit(q.max_sandboxes)],
    ['max ttl', inherit(q.max_ttl)],
    ['max exec timeout', inherit(q.max_exec_timeout)],
    ['updated', q.updated_at],
  ]);
}

const ls: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list owner quotas',
  async run(ctx) {
    const items = await ctx.client.quotas.list({ signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(items);
    else if (items.length === 0) ctx.out.note('no owner quotas');
    else
      ctx.out.table(
        [
          { header: 'OWNER', value: (q: OwnerQuota) => q.owner_id },
          { header: 'MAX SANDBOXES', value: (q: OwnerQuota) => inherit(q.max_sandboxes) },
          { header: 'MAX TTL', value: (q: OwnerQuota) => inherit(q.max_ttl) },
          { header: 'MAX EXEC TIMEOUT', value: (q: OwnerQuota) => inherit(q.max_exec_timeout) },
        ],
        items,
      );
    return 0;
  },
};

const get: CommandSpec = {
  name: 'get',
  summary: "show an owner's quota",
  args: [OWNER],
  async run(ctx, opts: { owner: string }) {
    const q = await ctx.client.quotas.get(opts.owner, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(q);
    else printQuota(ctx.out, q);
    return 0;
  },
};

const set: CommandSpec = {
  name: 'set',
  summary: "save an owner's quota (0 / 0s inherits the global default)",
  args: [OWNER],
  options: [
    { flags: '--max-sandboxes <n>', description: 'live sandboxes at once', kind: 'int' },
    { flags: '--max-ttl <duration>', description: 'longest TTL, whole seconds', kind: 'duration' },
    { flags: '--max-exec-timeout <duration>', description: 'longest exec timeout, whole seconds', kind: 'duration' },
  ],
  examples: ['sbx quota set alice --max-sandboxes 3 --max-ttl 2h'],
  async run(ctx, opts: { owner: string; maxSandboxes?: number; maxTtl?: string; maxExecTimeout?: string }) {
    const body: QuotaInput = {};
    if (opts.maxSandboxes !== undefined) body.max_sandboxes = opts.maxSandboxes;
    if (opts.maxTtl !== undefined) body.max_ttl = opts.maxTtl;
    if (opts.maxExecTimeout !== undefined) body.max_exec_timeout = opts.maxExecTimeout;
    if (Object.keys(body).length === 0)
      throw new UsageError('quota set needs at least one of --max-sandboxes, --max-ttl, --max-exec-timeout');
    const q = await ctx.client.quotas.set(opts.owner, body, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(q);
    else printQuota(ctx.out, q);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  aliases: ['delete'],
  summary: "delete an owner's quota",
  args: [OWNER],
  async run(ctx, opts: { owner: string }) {
    const r = await ctx.client.quotas.remove(opts.owner, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`deleted quota of ${opts.owner}`);
    return 0;
  },
};

const usage: CommandSpec = {
  name: 'usage',
  summary: "an owner's live sandboxes against the effective limits",
  args: [OWNER],
  async run(ctx, opts: { owner: string }) {
    const u = await ctx.client.quotas.usage(opts.owner, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(u);
    else
      ctx.out.fields([
        ['owner', u.owner_id],
        ['active sandboxes', `${u.active_sandboxes} of ${u.max_sandboxes > 0 ? u.max_sandboxes : 'unlimited'}`],
        ['max ttl', u.max_ttl],
        ['max exec timeout', u.max_exec_timeout],
        ['quota configured', u.quota_configured ? 'yes' : 'no'],
      ]);
    return 0;
  },
};

const summary: CommandSpec = {
  name: 'summary',
  summary: 'how many quotas set which limit',
  async run(ctx) {
    const s = await ctx.client.quotas.summary({ signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(s);
    else
      ctx.out.fields([
        ['quotas', String(s.total)],
        ['with max sandboxes', String(s.with_max_sandboxes)],
        ['with max ttl', String(s.with_max_ttl)],
        ['with max exec timeout', String(s.with_max_exec_timeout)],
      ]);
    return 0;
  },
};

export const quotaCommand: CommandSpec = {
  name: 'quota',
  aliases: ['quotas'],
  summary: 'owner quotas: ls, get, set, rm, usage, summary',
  subcommands: [ls, get, set, rm, usage, summary],
};
