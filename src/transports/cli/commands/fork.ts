import { UsageError } from '../errors.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

/** `sbx fork ID [-n N] [--ttl D]` (DESIGN.md §16): prints the new ids, one per line. */
export const forkCommand: CommandSpec = {
  name: 'fork',
  summary: 'copy a running sandbox: new sandboxes from its filesystem at this moment (prints their ids, one per line)',
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  options: [
    { flags: '-n, --count <n>', description: 'how many forks, 1–10 (default 1); all are made or none', kind: 'int' },
    { flags: '--ttl <duration>', description: "the forks' time to live (default: the server's)", kind: 'duration' },
    { flags: '--meta <key=value>', description: "metadata label of the forks (repeatable; default: the parent's)", kind: 'kv' },
    {
      flags: '--idempotency-key <key>',
      description: 'retry-safe: the same key within 24 h answers the first forks instead of forking again',
    },
  ],
  examples: ['sbx fork sb-1a2b3c', 'for id in $(sbx fork "$ID" -n 3); do sbx exec "$id" -- make test & done; wait'],
  async run(ctx, opts: { id: string; count?: number; ttl?: string; meta?: Record<string, string>; idempotencyKey?: string }) {
    if (opts.count !== undefined && (!Number.isInteger(opts.count) || opts.count < 1 || opts.count > 10))
      throw new UsageError('--count must be from 1 to 10');
    const req = {
      ...(opts.count !== undefined ? { count: opts.count } : {}),
      ...(opts.ttl !== undefined ? { ttl: opts.ttl } : {}),
      ...(opts.meta !== undefined ? { metadata: opts.meta } : {}),
    };
    const work = withSandboxId(ctx, opts.id, (id) => ctx.client.fork(id, req, { signal: ctx.signal, idempotencyKey: opts.idempotencyKey }));
    const { value: forks } = await ctx.out.spin(`forking ${opts.id}`, work);
    if (ctx.out.json) ctx.out.printJson(forks);
    else for (const s of forks) ctx.out.line(s.id);
    return 0;
  },
};
