import type { ProcessStart } from '../../../client/processes.js';
import type { ExecBytesChunk } from '../../../client/exec-frames.js';
import type { ExecInput } from '../../../client/types.js';
import { SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import type { StreamOutput } from '../output/stream-output.js';
import { ExitError, messageFor, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { exitStatus, forwardStdin, noWebSocketRoute, printSession } from '../shared/exec-session.js';
import { checkSandboxId, withSandboxId } from '../shared/sandbox-id.js';
import { readPipedStdin } from '../shared/stdin.js';
import { providerHasTty, runTerminalSession } from '../shared/terminal.js';
import type { CommandSpec } from '../spec.js';

/** The options of `sbx exec` as commander (or the fast path, fast-exec.ts) parsed them. */
export interface ExecFlags {
  id: string;
  command?: string[];
  env?: Record<string, string>;
  workdir?: string;
  timeout?: string;
  sh?: boolean;
  interactive?: boolean;
  tty?: boolean;
  detach?: boolean;
}

export const execCommand: CommandSpec = {
  name: 'exec',
  passThrough: true,
  usageExitCode: EXIT.execFailed,
  summary: 'run a command in a sandbox; streams its output and exits with its exit code',
  usage: '[options] ID CMD [ARG...]',
  description:
    "Like docker exec: sbx's options come before the id; everything after the id is the command and\n" +
    'its arguments, verbatim (argv mode, no shell; a leading -- is accepted). With --sh the word after\n' +
    'the id is a shell script (sh -c). stdout and stderr stream live and stay apart.\n' +
    'Local stdin is read only with -i: it reaches the command live over the WebSocket exec (EOF when it\n' +
    'closes). Without -i the command gets an empty stdin and sbx reads none of its own, so\n' +
    '`while read id; do sbx exec "$id" …; done < ids` runs once per line. -t gives the command a\n' +
    'terminal when the local stdin is one (-it: raw mode and window size, like sbx shell); without a\n' +
    'local terminal -t is ignored. With --json the result is buffered (-i stdin is read to its end).\n' +
    "Exit status: the command's own code; 124 when it hit --timeout; 125 for every failure of sbx\n" +
    'itself (unknown or ambiguous sandbox, server unreachable, bad usage).',
  args: [
    { name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true },
    { name: 'command', description: 'command and arguments, verbatim (with --sh: a shell script)', variadic: true },
  ],
  options: [
    {
      flags: '-d, --detach',
      description: 'run it in the background: print its process id and return (sbx ps, sbx logs --process, sbx kill)',
    },
    { flags: '-i, --interactive', description: 'send local stdin to the command (live)' },
    { flags: '-t, --tty', description: 'give the command a terminal (when the local stdin is one)' },
    { flags: '-e, --env <key=value>', description: 'environment variable (repeatable)', kind: 'kv' },
    { flags: '-w, --workdir <dir>', description: 'working directory in the sandbox' },
    { flags: '--timeout <duration>', description: 'kill the command after this long, e.g. 30s', kind: 'duration' },
    { flags: '--sh', description: "run the word after the id with sh -c (e.g. sbx exec --sh $ID 'ls | wc -l')" },
  ],
  examples: [
    'sbx exec $ID ls -la /tmp',
    'sbx exec $ID python3 -c "print(1)"',
    "sbx exec --sh $ID 'cd /tmp && ls | wc -l'",
    'echo hi | sbx exec -i $ID cat',
    'sbx exec -it $ID /bin/sh',
    'sbx exec --timeout 30s -w /workspace $ID make test',
    'sbx exec -d $ID python3 -m http.server 8000',
    'sbx --json exec $ID uname -a',
  ],
  run: (ctx, opts: ExecFlags) => execFailures(ctx, () => runExec(ctx, opts)),
};

/** What the streamed exec needs of a context: any output (the fast path's is chalk-free). */
type StreamContext = CliContext<StreamOutput>;

/**
 * `sbx exec` without -i, -t, -d and --json: the HTTP exec stream printed as it comes. The full CLI
 * gets here through `run`; the fast path of bin/sbx.js (fast-exec.ts) calls it directly, so both
 * paths run this one code (ids, prefixes, errors, exit codes).
 */
export function runStreamedExec(ctx: StreamContext, opts: ExecFlags): Promise<number> {
  return execFailures(ctx, async () => {
    const input = execInput(opts);
    return (await withSandboxId(ctx, opts.id, (id) => runStreamed(ctx, id, input))).value;
  });
}

/** Every failure of sbx itself is 125, so the command's own codes stay unambiguous (DESIGN.md §5). */
async function execFailures(ctx: StreamContext, work: () => Promise<number>): Promise<number> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ExitError) throw new ExitError(EXIT.execFailed, err.message);
    throw new ExitError(EXIT.execFailed, messageFor(err, keys(ctx)));
  }
}

/** The command line after the id, checked, and the exec request for it. */
function execInput(opts: ExecFlags): ExecInput {
  let argv = opts.command ?? [];
  if (argv[0] === '--') argv = argv.slice(1);
  if (argv.length === 0) {
    throw new UsageError(
      opts.sh
        ? "exec --sh needs a script after the id: sbx exec --sh ID 'a | b'"
        : 'exec needs a command after the id: sbx exec [options] ID CMD [ARG...]',
    );
  }
  checkSandboxId(opts.id);
  const input: ExecInput = { command: argv[0]!, args: argv.slice(1), mode: opts.sh ? 'shell' : 'argv' };
  // Output arrives byte-exact: bytes that are not UTF-8 come base64 instead of as U+FFFD.
  input.binary = true;
  if (opts.env) input.env = opts.env;
  if (opts.workdir) input.workdir = opts.workdir;
  if (opts.timeout) input.timeout = opts.timeout;
  return input;
}

async function runExec(ctx: CliContext, opts: ExecFlags): Promise<number> {
  const input = execInput(opts);
  if (opts.detach) return runDetached(ctx, opts, [input.command, ...(input.args ?? [])]);
  const interactive = Boolean(opts.interactive);
  // -t without a local terminal runs without one and says nothing (as docker does).
  const tty = Boolean(opts.tty) && ctx.stdin.isTTY && !ctx.out.json;

  if (ctx.out.json) {
    if (interactive) {
      const data = await readPipedStdin(ctx.stdin);
      if (data) input.stdin = data;
    }
    return (await withSandboxId(ctx, opts.id, (id) => runBuffered(ctx, id, input))).value;
  }
  if (!interactive && !tty) return (await withSandboxId(ctx, opts.id, (id) => runStreamed(ctx, id, input))).value;

  // Live stdin or a terminal: the WebSocket exec. The id is resolved first, so no stdin is read
  // for a request that fails on an unknown sandbox.
  const { id, value: sandbox } = await withSandboxId(ctx, opts.id, (x) => ctx.client.get(x, { signal: ctx.signal }));
  if (tty) {
    const canTty = await providerHasTty(ctx, sandbox.provider);
    return runTerminalSession(ctx, id, input, { tty: canTty, stdin: interactive });
  }
  let session;
  try {
    session = await ctx.client.execWs(id, input, { signal: ctx.signal });
  } catch (err) {
    if (!noWebSocketRoute(err)) throw err;
    ctx.out.note('this server has no WebSocket exec: stdin is read to its end and sent before the command starts');
    const data = await readPipedStdin(ctx.stdin);
    if (data) input.stdin = data;
    return runStreamed(ctx, id, input);
  }
  const stop = forwardStdin(ctx.stdin.stream, session);
  try {
    return await printSession(ctx, session);
  } finally {
    stop();
  }
}

/** `exec -d`: a background process; prints its id (or the process object with --json). */
async function runDetached(ctx: CliContext, opts: ExecFlags, argv: string[]): Promise<number> {
  if (opts.interactive || opts.tty) throw new UsageError('exec -d runs without stdin or a terminal: leave out -i and -t');
  const input: ProcessStart = { command: argv[0]!, args: argv.slice(1), mode: opts.sh ? 'shell' : 'argv' };
  if (opts.env) input.env = opts.env;
  if (opts.workdir) input.workdir = opts.workdir;
  if (opts.timeout) input.timeout = opts.timeout;
  const { value: p } = await withSandboxId(ctx, opts.id, (id) => ctx.client.processes.start(id, input, { signal: ctx.signal }));
  if (ctx.out.json) ctx.out.printJson(p);
  else ctx.out.line(p.id);
  return 0;
}

/** The HTTP exec stream, in binary frames (stdin, if any, sent up front). */
async function runStreamed(ctx: StreamContext, id: string, input: ExecInput): Promise<number> {
  let started = false;
  let exit: Extract<ExecBytesChunk, { stream: 'exit' }> | undefined;
  try {
    for await (const chunk of ctx.client.execBytes(id, input, { signal: ctx.signal, onStart: () => (started = true) })) {
      if (chunk.stream === 'exit') exit = chunk;
      else await ctx.out.raw(chunk.stream, chunk.data);
    }
  } catch (err) {
    if (!started) throw err;
    // Cancelled (Ctrl-C): the command was killed on purpose; main() reports the signal's exit code.
    if (ctx.signal.aborted) return EXIT.execFailed;
    ctx.out.error(`exec failed while the command ran: ${messageFor(err, keys(ctx))}`);
    return EXIT.execFailed;
  }
  if (!exit) {
    if (ctx.signal.aborted) return EXIT.execFailed;
    ctx.out.error('exec stream ended without an exit status');
    return EXIT.execFailed;
  }
  const failure = exit.error;
  if (failure) {
    ctx.out.error(`exec failed while the command ran: ${failure.message ?? 'unknown error'}`);
    return EXIT.execFailed;
  }
  if (exit.timed_out) return EXIT.execTimeout;
  return exitStatus(ctx, exit.exit_code);
}

function keys(ctx: { config: { apiKey?: string; adminKey?: string } }) {
  return { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) };
}

/** `--json`: the buffered result object; a deadline prints the partial output with exit 124. */
async function runBuffered(ctx: CliContext, id: string, input: ExecInput): Promise<number> {
  try {
    const result = await ctx.client.exec(id, input, { signal: ctx.signal });
    ctx.out.printJson(result);
    return exitStatus(ctx, result.exit_code);
  } catch (err) {
    if (err instanceof SbxError && err.code === 'timeout') {
      const d = err.details ?? {};
      const result: Record<string, unknown> = {
        exit_code: EXIT.execTimeout,
        stdout: d.stdout ?? '',
        stderr: d.stderr ?? '',
        duration: d.duration,
        timed_out: true,
      };
      if (d.stdout_encoding) result.stdout_encoding = d.stdout_encoding;
      if (d.stderr_encoding) result.stderr_encoding = d.stderr_encoding;
      ctx.out.printJson(result);
      return EXIT.execTimeout;
    }
    throw err;
  }
}
