import { EXIT } from '../exit-codes.js';
import { OWNER_OPTION, RESOURCE_OPTIONS, spawnRequest, type ResourceFlags } from '../shared/spawn-flags.js';
import type { CommandSpec } from '../spec.js';

export const admissionCommand: CommandSpec = {
  name: 'admission',
  summary: 'would this spawn be admitted? (creates nothing; exit 5 when denied)',
  options: [...RESOURCE_OPTIONS, OWNER_OPTION],
  examples: ['sbx admission --ttl 2h --owner alice'],
  async run(ctx, opts: ResourceFlags) {
    const d = await ctx.client.admission(spawnRequest(opts), { signal: ctx.signal });
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
