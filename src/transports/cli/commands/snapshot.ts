import type { SnapshotSummary } from '../../../client/types.js';
import { bytes, dash, relativeTime } from '../output/format.js';
import type { Column } from '../output/table.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

/** Columns of `sbx snapshots`. */
export function snapshotColumns(): Column<SnapshotSummary>[] {
  return [
    { header: 'NAME', value: (s) => s.name },
    { header: 'PROVIDER', value: (s) => s.provider },
    { header: 'IMAGE', value: (s) => s.image },
    { header: 'SIZE', value: (s) => bytes(s.size_bytes) },
    { header: 'KERNEL', value: (s) => dash(s.kernel) },
    { header: 'CREATED', value: (s) => relativeTime(s.created_at) },
  ];
}

/** `sbx snapshot ID NAME` (DESIGN.md §10): saves a running sandbox's filesystem. */
export const snapshotCommand: CommandSpec = {
  name: 'snapshot',
  summary: "save a running sandbox's filesystem as a named snapshot (spawn from it with --snapshot)",
  args: [
    { name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true },
    { name: 'name', description: 'snapshot name: [a-z0-9][a-z0-9_.-]{0,63}', required: true },
  ],
  examples: ['sbx snapshot sb-1a2b3c base', 'sbx spawn --snapshot base'],
  async run(ctx, opts: { id: string; name: string }) {
    const work = withSandboxId(ctx, opts.id, (id) => ctx.client.snapshot(id, opts.name, { signal: ctx.signal }));
    const { value: s } = await ctx.out.spin(`snapshotting ${opts.id}`, work);
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.line(`saved snapshot ${s.name} (${s.image}, ${bytes(s.size_bytes)})`);
    return 0;
  },
};
