import type { ExecWsInput } from '../../../client/index.js';
import type { CliContext } from '../context.js';
import { UsageError } from '../errors.js';
import { forwardStdin, printSession } from '../shared/exec-session.js';
import type { CommandSpec } from '../spec.js';

interface ShellFlags {
  id: string;
  sh?: string;
  env?: Record<string, string>;
  workdir?: string;
}

/** The local terminal as `sbx shell` drives it. */
interface Terminal {
  columns?: number;
  rows?: number;
  on?(event: 'resize', listener: () => void): unknown;
  removeListener?(event: 'resize', listener: () => void): unknown;
}

type RawStdin = { setRawMode?: (on: boolean) => unknown; isRaw?: boolean };

/** Whether the sandbox's provider can give the command a terminal (capability `tty`); true when unknown. */
async function providerHasTty(ctx: CliContext, provider: string): Promise<boolean> {
  try {
    const list = await ctx.client.providers.list({ signal: ctx.signal });
    const p = list.find((x) => x.name === provider);
    return p ? p.capabilities.includes('tty') : true;
  } catch {
    return true;
  }
}

export const shellCommand: CommandSpec = {
  name: 'shell',
  summary: 'open an interactive shell in a sandbox (a terminal over the WebSocket exec)',
  description:
    'Runs /bin/sh (or --sh CMD) in a terminal: the local terminal goes to raw mode, window size changes\n' +
    'follow, and the terminal is restored when the shell ends. Needs a terminal on stdin (use sbx exec in\n' +
    'scripts). On providers without terminals (mock, proot) the shell runs with pipes in line mode: no\n' +
    'prompt or line editing in the sandbox; Ctrl-D ends it. Exits with the shell\'s exit code.',
  args: [{ name: 'id', description: 'sandbox id', required: true }],
  options: [
    { flags: '--sh <command>', description: "what to run instead of /bin/sh, through sh -c (e.g. --sh 'bash -l')" },
    { flags: '-e, --env <key=value>', description: 'environment variable (repeatable)', kind: 'kv' },
    { flags: '-w, --workdir <dir>', description: 'working directory in the sandbox' },
  ],
  examples: ['sbx shell $ID', "sbx shell $ID --sh 'bash -l'", 'sbx shell $ID -w /tmp -e DEBUG=1'],
  async run(ctx, opts: ShellFlags) {
    if (!ctx.stdin.isTTY) throw new UsageError('shell needs a terminal on stdin; to run commands from a script or a pipe use sbx exec');
    const sandbox = await ctx.client.get(opts.id, { signal: ctx.signal });
    const tty = await providerHasTty(ctx, sandbox.provider);
    const term = ctx.out.streams.stdout as unknown as Terminal;
    const size = () => ({ cols: term.columns && term.columns > 0 ? term.columns : 80, rows: term.rows && term.rows > 0 ? term.rows : 24 });

    const input: ExecWsInput = opts.sh !== undefined ? { command: opts.sh, mode: 'shell' } : { command: '/bin/sh', mode: 'argv' };
    input.env = { ...(tty ? { TERM: ctx.env.TERM || 'xterm-256color' } : {}), ...(opts.env ?? {}) };
    // Terminal output is bytes (escape sequences, other encodings): it must reach the terminal unchanged.
    input.binary = true;
    if (opts.workdir) input.workdir = opts.workdir;
    if (tty) Object.assign(input, { tty: true, ...size() });
    else ctx.out.note(`sbx: the ${sandbox.provider} provider has no terminals: the shell runs without one (no prompt, line mode; Ctrl-D ends it)`);

    const session = await ctx.client.execWs(opts.id, input, { signal: ctx.signal });
    const stdin = ctx.stdin.stream as typeof ctx.stdin.stream & RawStdin;
    const wasRaw = Boolean(stdin.isRaw);
    const onResize = () => {
      const s = size();
      session.resize(s.cols, s.rows);
    };
    if (tty) {
      stdin.setRawMode?.(true);
      term.on?.('resize', onResize);
    }
    const stop = forwardStdin(ctx.stdin.stream, session);
    try {
      return await printSession(ctx, session);
    } finally {
      stop();
      if (tty) {
        term.removeListener?.('resize', onResize);
        stdin.setRawMode?.(wasRaw);
      }
    }
  },
};
