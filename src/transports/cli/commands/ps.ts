/** `sbx ps`: the background processes of a sandbox (DESIGN.md §10); `exec -d` starts them. */
import { shellWord } from '../../../shared/shell.js';
import type { ProcessInfo } from '../../../client/processes.js';
import { relativeTime } from '../output/format.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

function exitText(p: ProcessInfo): string {
  if (p.state === 'running') return '-';
  return p.exit_code === null ? '-' : String(p.exit_code);
}

/** The command as one could type it: argv words with spaces or quotes are single-quoted. */
function commandText(p: ProcessInfo): string {
  return p.mode === 'argv' ? [p.command, ...p.args].map(shellWord).join(' ') : [p.command, ...p.args.map(shellWord)].join(' ');
}

export const psCommand: CommandSpec = {
  name: 'ps',
  summary: 'list the background processes of a sandbox (started with exec -d)',
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  examples: ['sbx ps $ID', 'sbx --json ps $ID'],
  async run(ctx, opts: { id: string }) {
    const { value: items } = await withSandboxId(ctx, opts.id, (x) => ctx.client.processes.list(x, { signal: ctx.signal }));
    const { out } = ctx;
    if (out.json) out.printJson(items);
    else
      out.table(
        [
          { header: 'PROCESS', value: (p: ProcessInfo) => p.id },
          {
            header: 'STATE',
            value: (p: ProcessInfo) => p.state,
            style: (t, p) => (p.state === 'running' ? out.c.green(t) : p.state === 'exited' && p.exit_code === 0 ? t : out.c.yellow(t)),
          },
          { header: 'EXIT', value: (p: ProcessInfo) => exitText(p) },
          { header: 'STARTED', value: (p: ProcessInfo) => relativeTime(p.started_at) },
          { header: 'COMMAND', value: (p: ProcessInfo) => commandText(p) },
        ],
        items,
      );
    return 0;
  },
};
