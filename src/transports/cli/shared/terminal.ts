/**
 * A WebSocket exec session driven from the local terminal (`sbx shell`, `sbx exec -it`): raw mode
 * while it runs, window size changes forwarded, the terminal restored at the end.
 */
import type { ExecWsInput } from '../../../client/index.js';
import type { CliContext } from '../context.js';
import { forwardStdin, printSession } from './exec-session.js';

/** The local terminal as sbx drives it. */
interface Terminal {
  columns?: number;
  rows?: number;
  on?(event: 'resize', listener: () => void): unknown;
  removeListener?(event: 'resize', listener: () => void): unknown;
}

type RawStdin = { setRawMode?: (on: boolean) => unknown; isRaw?: boolean };

/** Whether the sandbox's provider can give the command a terminal (capability `tty`); true when unknown. */
export async function providerHasTty(ctx: CliContext, provider: string): Promise<boolean> {
  try {
    const list = await ctx.client.providers.list({ signal: ctx.signal });
    const p = list.find((x) => x.name === provider);
    return p ? p.capabilities.includes('tty') : true;
  } catch {
    return true;
  }
}

/**
 * Runs `input` over the WebSocket exec: with `tty`, in a terminal of the local window's size (raw
 * mode while `stdin` is forwarded); with `stdin`, local keystrokes or bytes go to the command.
 * Returns the exit status as printSession does.
 */
export async function runTerminalSession(
  ctx: CliContext,
  id: string,
  input: ExecWsInput,
  opts: { tty: boolean; stdin: boolean },
): Promise<number> {
  const term = ctx.out.streams.stdout as unknown as Terminal;
  const size = () => ({ cols: term.columns && term.columns > 0 ? term.columns : 80, rows: term.rows && term.rows > 0 ? term.rows : 24 });
  // Terminal output is bytes (escape sequences, other encodings): it must reach the terminal unchanged.
  input.binary = true;
  if (opts.tty) {
    input.env = { TERM: ctx.env.TERM || 'xterm-256color', ...(input.env ?? {}) };
    Object.assign(input, { tty: true, ...size() });
  }
  const session = await ctx.client.execWs(id, input, { signal: ctx.signal });
  const stdin = ctx.stdin.stream as typeof ctx.stdin.stream & RawStdin;
  const wasRaw = Boolean(stdin.isRaw);
  const raw = opts.tty && opts.stdin;
  const onResize = () => {
    const s = size();
    session.resize(s.cols, s.rows);
  };
  if (opts.tty) term.on?.('resize', onResize);
  if (raw) stdin.setRawMode?.(true);
  const stop = opts.stdin ? forwardStdin(ctx.stdin.stream, session) : () => undefined;
  try {
    return await printSession(ctx, session);
  } finally {
    stop();
    if (opts.tty) term.removeListener?.('resize', onResize);
    if (raw) stdin.setRawMode?.(wasRaw);
  }
}
