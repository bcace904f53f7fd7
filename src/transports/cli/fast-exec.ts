/**
 * The fast path of `sbx exec ID CMD…` (issue 33, DESIGN.md §11): bin/sbx.js loads this module,
 * bundled alone as CommonJS (dist/cli-exec.cjs, scripts/build-cli.mjs), before the full CLI. When
 * argv is a plain streamed exec that this parser understands completely, it runs the exec command's
 * own streamed path (`runStreamedExec`) through the same `runInvocation` as `main()`: the same client
 * settings, client, output, errors and exit codes, without the ES module loader, commander, the
 * command tree or chalk. Anything else (other commands, -i, -t, -d, --json, --help, an option or a
 * value it does not take as commander would) answers undefined and the full CLI runs as before.
 */
import { NetTransport } from '../../client/net-transport.js';
import type { GlobalFlags } from './client-config.js';
import { type ExecFlags, runStreamedExec } from './commands/exec.js';
import { type Sink, StreamOutput } from './output/stream-output.js';
import { runInvocation } from './run-command.js';
import { parseDurationFlag, parseKeyValue } from './shared/parse.js';

/** Global options that take a value, by flag, with their GlobalFlags key. */
const GLOBAL_VALUES: Readonly<Record<string, 'url' | 'apiKey' | 'adminKey' | 'user'>> = {
  '--url': 'url',
  '--api-key': 'apiKey',
  '--admin-key': 'adminKey',
  '--user': 'user',
};

type ExecOption = '--env' | '--workdir' | '--timeout';
const EXEC_VALUES: Readonly<Record<string, ExecOption>> = {
  '-e': '--env',
  '--env': '--env',
  '-w': '--workdir',
  '--workdir': '--workdir',
  '--timeout': '--timeout',
};

export interface FastExec {
  flags: GlobalFlags;
  opts: ExecFlags;
}

/**
 * `[globals] exec [options] ID CMD [ARG…]` → the parsed run, or undefined when the full CLI must
 * parse it (it then gives the usage errors, help and every other mode exactly as before).
 * Options take their value as the next word or after `=` (long ones); a value that starts with `-`
 * or fails its parser declines. Global options given after `exec` win over those before it, as in
 * program.ts.
 */
export function parseFastExec(argv: readonly string[]): FastExec | undefined {
  const root: GlobalFlags = {};
  let i = 0;
  for (; i < argv.length && argv[i] !== 'exec'; i++) {
    const taken = globalOption(argv, i, root);
    if (taken === 0) return undefined;
    i += taken - 1;
  }
  if (i >= argv.length) return undefined;
  const local: GlobalFlags = {};
  const opts: ExecFlags = { id: '' };
  for (i++; i < argv.length; i++) {
    const word = argv[i]!;
    if (!word.startsWith('-')) break;
    const taken = globalOption(argv, i, local) || execOption(argv, i, opts);
    if (taken === 0) return undefined;
    i += taken - 1;
  }
  if (i >= argv.length) return undefined;
  opts.id = argv[i]!;
  opts.command = argv.slice(i + 1);
  return { flags: { ...root, ...local }, opts };
}

/** `--flag VALUE` or `--flag=VALUE` at argv[i]: [flag, value, words taken], or undefined. */
function valueOption(argv: readonly string[], i: number, known: Readonly<Record<string, string>>): [string, string, number] | undefined {
  const word = argv[i]!;
  const eq = word.startsWith('--') ? word.indexOf('=') : -1;
  if (eq > 0) {
    const flag = word.slice(0, eq);
    return Object.hasOwn(known, flag) ? [flag, word.slice(eq + 1), 1] : undefined;
  }
  if (!Object.hasOwn(known, word)) return undefined;
  const value = argv[i + 1];
  if (value === undefined || value.startsWith('-')) return undefined;
  return [word, value, 2];
}

/** A global option at argv[i] into `into`: the words it took, 0 when it is not one this path takes. */
function globalOption(argv: readonly string[], i: number, into: GlobalFlags): number {
  if (argv[i] === '--no-color') {
    into.color = false;
    return 1;
  }
  const v = valueOption(argv, i, GLOBAL_VALUES);
  if (!v) return 0;
  into[GLOBAL_VALUES[v[0]]!] = v[1];
  return v[2];
}

/** An exec option at argv[i] into `opts`: the words it took, 0 when this path does not take it. */
function execOption(argv: readonly string[], i: number, opts: ExecFlags): number {
  if (argv[i] === '--sh') {
    opts.sh = true;
    return 1;
  }
  const v = valueOption(argv, i, EXEC_VALUES);
  if (!v) return 0;
  const [flag, value, taken] = v;
  const option = EXEC_VALUES[flag]!;
  try {
    if (option === '--env') {
      const [k, val] = parseKeyValue(value, option);
      opts.env = { ...(opts.env ?? {}), [k]: val };
    } else if (option === '--workdir') opts.workdir = value;
    else opts.timeout = parseDurationFlag(value, option);
  } catch {
    return 0;
  }
  return taken;
}

/** Where output goes: the process's streams, made on first use (bin/sbx.js passes its own). */
export interface FastIo {
  stdout(): Sink;
  stderr(): Sink;
}

const PROCESS_IO: FastIo = { stdout: () => process.stdout, stderr: () => process.stderr };

/**
 * A sink that makes its stream on the first byte written (or the first question about it): a run
 * that prints nothing never makes process.stdout, whose making loads node:stream for a pipe. An
 * empty write (a flush) to a stream never made is done at once.
 */
function lazySink(open: () => Sink): Sink {
  let sink: Sink | undefined;
  return {
    write(chunk, cb) {
      if (sink === undefined && chunk.length === 0) {
        cb?.();
        return true;
      }
      sink ??= open();
      return sink.write(chunk, cb);
    },
    once(event, listener) {
      sink ??= open();
      return sink.once?.(event, listener);
    },
    get isTTY() {
      sink ??= open();
      return sink.isTTY;
    },
  };
}

/**
 * Runs `sbx exec` for `argv` when it is a plain streamed exec; undefined (nothing done, nothing
 * printed) when the full CLI must run it.
 */
export function fastExec(argv: readonly string[], io: FastIo = PROCESS_IO): Promise<number> | undefined {
  const run = parseFastExec(argv);
  if (!run) return undefined;
  const out = new StreamOutput({ stdout: lazySink(io.stdout), stderr: lazySink(io.stderr), json: false });
  const transport = new NetTransport();
  return runInvocation({ out, flags: run.flags, env: process.env, cwd: process.cwd(), useProfile: true, transport }, (ctx) =>
    runStreamedExec(ctx, run.opts),
  );
}
