import { relativeTime } from '../output/format.js';
import type { CommandSpec } from '../spec.js';

export const workersCommand: CommandSpec = {
  name: 'workers',
  summary: 'list registered workers, or show one',
  args: [{ name: 'id', description: 'worker id for details' }],
  async run(ctx, opts: { id?: string }) {
    const { out, client } = ctx;
    if (opts.id) {
      const w = await client.workers.get(opts.id, { signal: ctx.signal });
      if (out.json) out.printJson(w);
      else
        out.fields([
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
      return 0;
    }
    const items = await client.workers.list({ signal: ctx.signal });
    if (out.json) out.printJson(items);
    else
      out.table([
        { header: 'ID', value: (w) => w.id },
        { header: 'STATUS', value: (w) => (w.stale ? `${w.status} (stale)` : w.status), style: (t, w) => (w.stale ? out.c.yellow(t) : w.status === 'online' ? out.c.green(t) : t) },
        { header: 'HOSTNAME', value: (w) => w.hostname },
        { header: 'PROVIDERS', value: (w) => w.providers.join(',') },
        { header: 'HEARTBEAT', value: (w) => relativeTime(w.last_heartbeat) },
      ], items);
    return 0;
  },
};
