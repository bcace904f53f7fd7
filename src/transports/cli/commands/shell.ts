import type { ExecWsInput } from '../../../client/index.js';
import { UsageError } from '../errors.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import { providerHasTty, runTerminalSession } from '../shared/terminal.js';
import type { CommandSpec } from '../spec.js';

interface ShellFlags {
  id: string;
  sh?: string;
  env?: Record<string, string>;
  workdir?: string;
}

export const shellCommand: CommandSpec = {
  name: 'shell',
  summary: 'open an interactive shell in a sandbox (a terminal over the WebSocket exec)',
  description:
    'Runs /bin/sh (or --sh CMD) in a terminal: the local terminal goes to raw mode, window size changes\n' +
    'follow, and the terminal is restored when the shell ends. Needs a terminal on stdin (use sbx exec in\n' +
    'scripts). On providers without terminals (mock, proot) the shell runs with pipes in line mode: no\n' +
    "prompt or line editing in the sandbox; Ctrl-D ends it. Exits with the shell's exit code.",
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  options: [
    { flags: '--sh <command>', description: "what to run instead of /bin/sh, through sh -c (e.g. --sh 'bash -l')" },
    { flags: '-e, --env <key=value>', description: 'environment variable (repeatable)', kind: 'kv' },
    { flags: '-w, --workdir <dir>', description: 'working directory in the sandbox' },
  ],
  examples: ['sbx shell $ID', "sbx shell $ID --sh 'bash -l'", 'sbx shell $ID -w /tmp -e DEBUG=1'],
  async run(ctx, opts: ShellFlags) {
    if (!ctx.stdin.isTTY) throw new UsageError('shell needs a terminal on stdin; to run commands from a script or a pipe use sbx exec');
    const { id, value: sandbox } = await withSandboxId(ctx, opts.id, (x) => ctx.client.get(x, { signal: ctx.signal }));
    const tty = await providerHasTty(ctx, sandbox.provider);
    const input: ExecWsInput = opts.sh !== undefined ? { command: opts.sh, mode: 'shell' } : { command: '/bin/sh', mode: 'argv' };
    if (opts.env) input.env = { ...opts.env };
    if (opts.workdir) input.workdir = opts.workdir;
    if (!tty)
      ctx.out.note(
        `sbx: the ${sandbox.provider} provider has no terminals: the shell runs without one (no prompt, line mode; Ctrl-D ends it)`,
      );
    return runTerminalSession(ctx, id, input, { tty, stdin: true });
  },
};
