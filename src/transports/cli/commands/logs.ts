import { SbxError } from '../../../core/errors.js';
import type { CliContext } from '../context.js';
import type { CommandSpec } from '../spec.js';

const FOLLOW_WINDOW = 1000;
const POLL_MS = 1000;

/**
 * Lines of `cur` not yet in `prev`: both are tail windows of the same log, `cur` taken later, so
 * the overlap is the longest suffix of `prev` that starts `cur`.
 */
export function newLines(prev: readonly string[], cur: readonly string[]): string[] {
  for (let k = Math.min(prev.length, cur.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k && same; i++) same = prev[prev.length - k + i] === cur[i];
    if (same) return cur.slice(k);
  }
  return [...cur];
}

export const logsCommand: CommandSpec = {
  name: 'logs',
  summary: 'print the console log of a sandbox (-f to follow)',
  args: [{ name: 'id', description: 'sandbox id', required: true }],
  options: [
    { flags: '-n, --lines <count>', description: 'number of lines (default 100)', kind: 'int' },
    { flags: '-f, --follow', description: 'keep printing new lines until the sandbox goes away (Ctrl-C stops)' },
  ],
  async run(ctx, opts: { id: string; lines?: number; follow?: boolean }) {
    const lines = await ctx.client.logs(opts.id, opts.lines, { signal: ctx.signal });
    if (ctx.out.json && !opts.follow) {
      ctx.out.printJson(lines);
      return 0;
    }
    for (const l of lines) print(ctx, l);
    if (!opts.follow) return 0;
    return follow(ctx, opts.id, opts.lines === undefined ? lines : await ctx.client.logs(opts.id, FOLLOW_WINDOW, { signal: ctx.signal }));
  },
};

function print(ctx: CliContext, line: string): void {
  if (ctx.out.json) ctx.out.jsonLine(line);
  else ctx.out.line(line);
}

/**
 * Re-reads the log tail whenever the event stream reports exec activity in this sandbox, and at
 * least every second (console output also comes from outside exec). Ends when the sandbox is gone.
 */
async function follow(ctx: CliContext, id: string, seen: string[]): Promise<number> {
  let prev = seen;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  if (ctx.signal.aborted) stop.abort();
  let kick: (() => void) | undefined;
  stop.signal.addEventListener('abort', () => kick?.(), { once: true });
  let gone = false;

  const watcher = (async () => {
    try {
      for await (const ev of ctx.client.events({ sandboxId: id, types: ['exec.*', 'sandbox.destroyed'], signal: stop.signal })) {
        if (ev.type === 'sandbox.destroyed') gone = true;
        kick?.();
      }
    } catch {
      // No event stream (older server, proxy): polling alone still follows the log.
    }
  })();

  try {
    while (!stop.signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, POLL_MS);
        kick = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (stop.signal.aborted) break;
      let cur: string[];
      try {
        cur = await ctx.client.logs(id, FOLLOW_WINDOW, { signal: stop.signal });
      } catch (err) {
        if (err instanceof SbxError && err.code === 'not_found') {
          ctx.out.note(`sandbox ${id} is gone`);
          return 0;
        }
        if (stop.signal.aborted) break;
        throw err;
      }
      for (const l of newLines(prev, cur)) print(ctx, l);
      prev = cur;
      if (gone) {
        ctx.out.note(`sandbox ${id} was destroyed`);
        return 0;
      }
    }
    return 0;
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
    stop.abort();
    await watcher;
  }
}
