import { SbxError } from '../../../contracts/errors.js';
import { exitCodeFor, messageFor, UsageError } from '../errors.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

export const rmCommand: CommandSpec = {
  name: 'rm',
  aliases: ['destroy'],
  summary: 'destroy sandboxes, or prune expired ones with --all-expired',
  args: [{ name: 'ids', description: 'sandbox ids (or unique prefixes)', variadic: true }],
  options: [{ flags: '--all-expired', description: 'remove every expired sandbox (prune)' }],
  examples: ['sbx rm sb-1a2b3c', 'sbx rm --all-expired'],
  async run(ctx, opts: { ids?: string[]; allExpired?: boolean }) {
    const ids = opts.ids ?? [];
    if (ids.length === 0 && !opts.allExpired) throw new UsageError('rm needs at least one sandbox id, or --all-expired');
    const results: Array<{ id: string; status: string; code?: string; message?: string }> = [];
    let exit = 0;
    for (const id of ids) {
      try {
        const { id: full, value: r } = await withSandboxId(ctx, id, (x) => ctx.client.destroy(x, { signal: ctx.signal }));
        results.push({ id: full, status: r.status });
        if (!ctx.out.json) ctx.out.line(`destroyed ${full}`);
      } catch (err) {
        if (!(err instanceof SbxError) || err.code === 'unavailable') throw err;
        // Keep going through the list; report each failure and exit with the first failure's code.
        results.push({ id, status: 'error', code: err.code, message: err.message });
        if (!ctx.out.json)
          ctx.out.error(`${id}: ${messageFor(err, { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) })}`);
        if (exit === 0) exit = exitCodeFor(err);
      }
    }
    let pruned: number | undefined;
    if (opts.allExpired) {
      pruned = (await ctx.client.prune({ signal: ctx.signal })).pruned;
      if (!ctx.out.json) ctx.out.line(`pruned ${pruned} expired sandbox${pruned === 1 ? '' : 'es'}`);
    }
    if (ctx.out.json)
      ctx.out.printJson(opts.allExpired && ids.length === 0 ? { pruned } : { results, ...(pruned !== undefined ? { pruned } : {}) });
    return exit;
  },
};
