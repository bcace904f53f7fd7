import { SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import { printProcessOutput } from '../shared/process-output.js';
import type { CommandSpec } from '../spec.js';

const FOLLOW_WINDOW = 1000;
const POLL_MS = 1000;

/**
 * Lines of `cur` not yet in `prev`: both are tail windows of the same log, `cur` taken later, so
 * the overlap is the longest suffix of `prev` that starts `cur`. Only for servers without log
 * cursors: identical lines make the overlap ambiguous.
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
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  options: [
    { flags: '-n, --lines <count>', description: 'number of lines (default 100)', kind: 'int' },
    { flags: '-f, --follow', description: 'keep printing new lines until the sandbox goes away (Ctrl-C stops)' },
    {
      flags: '-p, --process <pid>',
      description: "a background process's output instead (exec -d); with -f until it ends, exiting with its code",
    },
  ],
  examples: ['sbx logs $ID', 'sbx logs -f $ID', 'sbx logs $ID --process p-abc123def456 -f'],
  async run(ctx, opts: { id: string; lines?: number; follow?: boolean; process?: string }) {
    if (opts.process !== undefined) return printProcessOutput(ctx, opts.id, opts.process, Boolean(opts.follow));
    const { id, value: first } = await withSandboxId(ctx, opts.id, (x) =>
      ctx.client.readLogs(x, { lines: opts.lines }, { signal: ctx.signal }),
    );
    if (ctx.out.json && !opts.follow) {
      ctx.out.printJson(first.lines);
      return 0;
    }
    for (const l of first.lines) print(ctx, l);
    if (!opts.follow) return 0;
    if (first.cursor !== undefined) return follow(ctx, id, cursorReader(ctx, id, first.cursor));
    // An older server: match the overlap of successive tail windows (seeded with a full window).
    const seed = opts.lines === undefined ? first.lines : await ctx.client.logs(id, FOLLOW_WINDOW, { signal: ctx.signal });
    return follow(ctx, id, overlapReader(ctx, id, seed));
  },
};

function print(ctx: CliContext, line: string): void {
  if (ctx.out.json) ctx.out.jsonLine(line);
  else ctx.out.line(line);
}

/** Fetches the lines not printed yet and hands them to `emit`, in order. */
type Reader = (signal: AbortSignal, emit: (line: string) => void) => Promise<void>;

/** Every line after `cursor` exactly once, a window at a time until caught up. */
function cursorReader(ctx: CliContext, id: string, cursor: number): Reader {
  let fallback: Reader | undefined;
  return async (signal, emit) => {
    if (fallback) return fallback(signal, emit);
    for (;;) {
      const page = await ctx.client.readLogs(id, { lines: FOLLOW_WINDOW, after: cursor }, { signal });
      if (page.cursor === undefined) {
        // The server was replaced by one without cursors: this answer is a plain tail window.
        fallback = overlapReader(ctx, id, page.lines);
        return;
      }
      for (const l of page.lines) emit(l);
      cursor = page.cursor;
      if (page.lines.length < FOLLOW_WINDOW) return;
    }
  };
}

/** New lines of each tail window, found by content (repeated identical lines may be missed). */
function overlapReader(ctx: CliContext, id: string, seed: string[]): Reader {
  let prev = seed;
  return async (signal, emit) => {
    const cur = await ctx.client.logs(id, FOLLOW_WINDOW, { signal });
    for (const l of newLines(prev, cur)) emit(l);
    prev = cur;
  };
}

/**
 * Reads new lines whenever the event stream reports exec activity in this sandbox, and at least
 * every second (console output also comes from outside exec). Ends when the sandbox is gone.
 */
async function follow(ctx: CliContext, id: string, read: Reader): Promise<number> {
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  if (ctx.signal.aborted) stop.abort();
  // Activity seen while a read is under way makes the next read start at once.
  let pending = false;
  let wake: (() => void) | undefined;
  const kick = () => {
    pending = true;
    wake?.();
  };
  stop.signal.addEventListener('abort', kick, { once: true });
  let gone = false;

  const watcher = (async () => {
    try {
      for await (const ev of ctx.client.events({ sandboxId: id, types: ['exec.*', 'sandbox.destroyed'], signal: stop.signal })) {
        if (ev.type === 'sandbox.destroyed') gone = true;
        kick();
      }
    } catch {
      // No event stream (older server, proxy): polling alone still follows the log.
    }
  })();

  try {
    while (!stop.signal.aborted) {
      if (!pending) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, POLL_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      pending = false;
      if (stop.signal.aborted) break;
      try {
        await read(stop.signal, (l) => print(ctx, l));
      } catch (err) {
        if (err instanceof SbxError && err.code === 'not_found') {
          ctx.out.note(`sandbox ${id} is gone`);
          return 0;
        }
        if (stop.signal.aborted) break;
        throw err;
      }
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
