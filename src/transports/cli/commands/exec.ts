import type { ExecChunk, ExecInput } from '../../../client/types.js';
import { SbxError } from '../../../core/errors.js';
import type { CliContext } from '../context.js';
import { messageFor, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { exitStatus, forwardStdin, noWebSocketRoute, outputBytes, printSession } from '../shared/exec-session.js';
import { readPipedStdin } from '../shared/stdin.js';
import type { CommandSpec } from '../spec.js';

interface ExecFlags {
  id: string;
  command?: string[];
  env?: Record<string, string>;
  workdir?: string;
  timeout?: string;
  sh?: string;
  stdin?: boolean;
}

export const execCommand: CommandSpec = {
  name: 'exec',
  summary: 'run a command in a sandbox; streams its output and exits with its exit code',
  description:
    'Arguments after -- run directly (argv mode, no shell); --sh runs a shell script instead. stdout and\n' +
    'stderr stream live and stay apart. Piped local stdin is sent to the command live, chunk by chunk, over\n' +
    'the WebSocket exec (the command starts at once; EOF when the pipe closes); -n/--no-stdin never reads it.\n' +
    'With --json stdin is read to the end first and the result is buffered.\n' +
    'Exit status: the command\'s own code; 124 when it hit --timeout; 125 when sbx failed while it ran.',
  args: [
    { name: 'id', description: 'sandbox id', required: true },
    { name: 'command', description: 'command and arguments (after --)', variadic: true },
  ],
  options: [
    { flags: '-e, --env <key=value>', description: 'environment variable (repeatable)', kind: 'kv' },
    { flags: '-w, --workdir <dir>', description: 'working directory in the sandbox' },
    { flags: '-t, --timeout <duration>', description: 'kill the command after this long, e.g. 30s', kind: 'duration' },
    { flags: '--sh <script>', description: "run a shell script with sh -c (e.g. --sh 'ls | wc -l')" },
    { flags: '-n, --no-stdin', description: 'never read local stdin (like ssh -n)' },
  ],
  examples: [
    'sbx exec $ID -- python3 -c "print(1)"',
    "sbx exec $ID --sh 'cd /tmp && ls | wc -l'",
    'echo hi | sbx exec $ID -- cat',
    'tail -f app.log | sbx exec $ID -- grep --line-buffered ERROR',
    'sbx exec $ID --json -- uname -a',
  ],
  async run(ctx, opts: ExecFlags) {
    const argv = opts.command ?? [];
    let input: ExecInput;
    if (opts.sh !== undefined) {
      input = { command: opts.sh, args: argv, mode: 'shell' };
    } else {
      if (argv.length === 0) throw new UsageError("exec needs a command after -- (or --sh 'script')");
      input = { command: argv[0]!, args: argv.slice(1), mode: 'argv' };
    }
    // Output arrives byte-exact: bytes that are not UTF-8 come base64 instead of as U+FFFD.
    input.binary = true;
    if (opts.env) input.env = opts.env;
    if (opts.workdir) input.workdir = opts.workdir;
    if (opts.timeout) input.timeout = opts.timeout;
    const piped = opts.stdin !== false && !ctx.stdin.isTTY;

    if (ctx.out.json || !piped) {
      if (piped) {
        const data = await readPipedStdin(ctx.stdin);
        if (data) input.stdin = data;
      }
      return ctx.out.json ? runBuffered(ctx, opts.id, input) : runStreamed(ctx, opts.id, input);
    }

    // Piped stdin goes live over the WebSocket exec; a server without it gets it buffered.
    let session;
    try {
      session = await ctx.client.execWs(opts.id, input, { signal: ctx.signal });
    } catch (err) {
      if (!noWebSocketRoute(err)) throw err;
      ctx.out.note('this server has no WebSocket exec: stdin is read to its end and sent before the command starts');
      const data = await readPipedStdin(ctx.stdin);
      if (data) input.stdin = data;
      return runStreamed(ctx, opts.id, input);
    }
    const stop = forwardStdin(ctx.stdin.stream, session);
    try {
      return await printSession(ctx, session);
    } finally {
      stop();
    }
  },
};

/** The NDJSON stream of the HTTP exec (stdin, if any, sent up front). */
async function runStreamed(ctx: CliContext, id: string, input: ExecInput): Promise<number> {
  let started = false;
  let exit: ExecChunk | undefined;
  try {
    for await (const chunk of ctx.client.execStream(id, input, { signal: ctx.signal, onStart: () => (started = true) })) {
      if (chunk.stream === 'exit') exit = chunk;
      else await ctx.out.raw(chunk.stream, outputBytes(chunk));
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
  const failure = (exit as { error?: { message?: string } }).error;
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
      const result: Record<string, unknown> = { exit_code: EXIT.execTimeout, stdout: d.stdout ?? '', stderr: d.stderr ?? '', duration: d.duration, timed_out: true };
      if (d.stdout_encoding) result.stdout_encoding = d.stdout_encoding;
      if (d.stderr_encoding) result.stderr_encoding = d.stderr_encoding;
      ctx.out.printJson(result);
      return EXIT.execTimeout;
    }
    throw err;
  }
}
