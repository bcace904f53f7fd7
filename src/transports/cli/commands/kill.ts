/** `sbx kill`: end a background process, or send it a signal (DESIGN.md §10). */
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

export const killCommand: CommandSpec = {
  name: 'kill',
  summary: 'kill a background process, or send it a signal with -s',
  description:
    'Without -s the process is killed (SIGKILL to all of it) and the command waits until it ended.\nWith -s ' +
    'the signal is sent and the command returns at once.',
  args: [
    { name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true },
    { name: 'process', description: 'process id (p-…)', required: true },
  ],
  options: [{ flags: '-s, --signal <name>', description: 'send this signal instead: INT, TERM, KILL, HUP, QUIT, USR1, USR2' }],
  examples: ['sbx kill $ID p-abc123def456', 'sbx kill -s TERM $ID p-abc123def456'],
  async run(ctx, opts: { id: string; process: string; signal?: string }) {
    const { value: p } = await withSandboxId(ctx, opts.id, (x) =>
      opts.signal
        ? ctx.client.processes.signal(x, opts.process, opts.signal, { signal: ctx.signal })
        : ctx.client.processes.kill(x, opts.process, { signal: ctx.signal }),
    );
    if (ctx.out.json) ctx.out.printJson(p);
    else ctx.out.line(`${p.id} ${p.state}${p.state !== 'running' && p.exit_code !== null ? ` (exit ${p.exit_code})` : ''}`);
    return 0;
  },
};
