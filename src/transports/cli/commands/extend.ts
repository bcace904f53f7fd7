import { relativeTime } from '../output/format.js';
import { UsageError } from '../errors.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

export const extendCommand: CommandSpec = {
  name: 'extend',
  summary: 'extend a sandbox TTL (expires_at = now + ttl)',
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  options: [{ flags: '--ttl <duration>', description: 'new time to live from now, e.g. 1h', kind: 'duration' }],
  examples: ['sbx extend sb-1a2b3c --ttl 1h'],
  async run(ctx, opts: { id: string; ttl?: string }) {
    if (!opts.ttl) throw new UsageError('extend needs --ttl, e.g. --ttl 30m');
    const ttl = opts.ttl;
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.extend(id, ttl, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.line(`${s.id} now expires at ${s.expires_at} (${relativeTime(s.expires_at)})`);
    return 0;
  },
};
