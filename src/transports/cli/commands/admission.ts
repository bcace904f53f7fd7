import { EXIT } from '../exit-codes.js';
import { OWNER_OPTION, RESOURCE_OPTIONS, spawnRequest, type ResourceFlags } from '../shared/spawn-flags.js';
import type { CommandSpec } from '../spec.js';

export const admissionCommand: CommandSpec = {
  name: 'admission',
  summary: 'would this spawn be admitted? (creates nothing; exit 5 when denied)',
  options: [
    ...RESOURCE_OPTIONS,
    { flags: '--template <name>', description: 'ask for a spawn from this template (its settings, then the flags)' },
    OWNER_OPTION,
  ],
  examples: ['sbx admission --ttl 2h --owner alice', 'sbx admission --template py --owner alice'],
  async run(ctx, opts: ResourceFlags & { template?: string }) {
    let req = spawnRequest(opts);
    if (opts.template !== undefined) {
      // The same request a template spawn makes: the template's fields, with the flags on top.
      const t = await ctx.client.templates.get(opts.template, { signal: ctx.signal });
      // Unset template fields are null; as undefined the request's JSON leaves them out.
      const set = <T>(v: T | null | undefined): T | undefined => v ?? undefined;
      const base = { image: set(t.image), provider: set(t.provider), memory_mb: set(t.memory_mb), vcpus: set(t.vcpus), ttl: set(t.ttl) };
      const flags = Object.fromEntries(Object.entries(req).filter(([, v]) => v !== undefined)) as typeof req;
      req = { ...base, ...flags, metadata: { ...t.metadata, ...(req.metadata ?? {}) } };
    }
    const d = await ctx.client.admission(req, { signal: ctx.signal });
    const { out } = ctx;
    if (out.json) out.printJson(d);
    else {
      const limit = (n: number) => (n > 0 ? String(n) : 'unlimited');
      out.fields([
        ['allowed', d.allowed ? out.c.green('yes') : out.c.red('no')],
        ...(d.allowed ? [] : [['reason', d.reason ?? '-'] as const, ['queueable', d.queueable ? 'yes' : 'no'] as const]),
        ['sandboxes', `${d.active_sandboxes} of ${limit(d.max_sandboxes)}`],
        ['owner sandboxes', `${d.active_owner_sandboxes} of ${limit(d.max_owner_sandboxes)}`],
        ['max ttl', d.max_ttl],
      ]);
    }
    return d.allowed ? 0 : EXIT.rejected;
  },
};
