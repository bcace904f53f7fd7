import type { ExecChunk, ExecInput } from '../../../client/types.js';
import { SbxError } from '../../../core/errors.js';
import { messageFor, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
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
    'stderr stream live and stay apart. Piped local stdin is sent to the command (disable with --no-stdin).\n' +
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
    { flags: '--no-stdin', description: 'do not send piped local stdin' },
  ],
  examples: ['sbx exec $ID -- python3 -c "print(1)"', "sbx exec $ID --sh 'cd /tmp && ls | wc -l'", 'echo hi | sbx exec $ID -- cat', 'sbx exec $ID --json -- uname -a'],
  async run(ctx, opts: ExecFlags) {
    const argv = opts.command ?? [];
    let input: ExecInput;
    if (opts.sh !== undefined) {
      input = { command: opts.sh, args: argv, mode: 'shell' };
    } else {
      if (argv.length === 0) throw new UsageError("exec needs a command after -- (or --sh 'script')");
      input = { command: argv[0]!, args: argv.slice(1), mode: 'argv' };
    }
    if (opts.env) input.env = opts.env;
    if (opts.workdir) input.workdir = opts.workdir;
    if (opts.timeout) input.timeout = opts.timeout;
    if (opts.stdin !== false) {
      const data = await readPipedStdin(ctx.stdin);
      if (data) input.stdin = data;
    }

    if (ctx.out.json) return runBuffered(ctx, opts.id, input);

    let started = false;
    let exit: ExecChunk | undefined;
    try {
      for await (const chunk of ctx.client.execStream(opts.id, input, { signal: ctx.signal, onStart: () => (started = true) })) {
        if (chunk.stream === 'exit') exit = chunk;
        else await ctx.out.raw(chunk.stream, chunk.data);
      }
    } catch (err) {
      if (!started) throw err;
      ctx.out.error(`exec failed while the command ran: ${messageFor(err, keys(ctx))}`);
      return EXIT.execFailed;
    }
    if (!exit) {
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
  },
};

function keys(ctx: { config: { apiKey?: string; adminKey?: string } }) {
  return { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) };
}

function exitStatus(ctx: Parameters<NonNullable<CommandSpec['run']>>[0], code: number | undefined): number {
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 0 || code > 255) {
    ctx.out.error(`the sandbox reported an unusable exit code ${JSON.stringify(code)}`);
    return EXIT.execFailed;
  }
  return code;
}

/** `--json`: the buffered result object; a deadline prints the partial output with exit 124. */
async function runBuffered(ctx: Parameters<NonNullable<CommandSpec['run']>>[0], id: string, input: ExecInput): Promise<number> {
  try {
    const result = await ctx.client.exec(id, input, { signal: ctx.signal });
    ctx.out.printJson(result);
    return exitStatus(ctx, result.exit_code);
  } catch (err) {
    if (err instanceof SbxError && err.code === 'timeout') {
      const d = err.details ?? {};
      ctx.out.printJson({ exit_code: EXIT.execTimeout, stdout: d.stdout ?? '', stderr: d.stderr ?? '', duration: d.duration, timed_out: true });
      return EXIT.execTimeout;
    }
    throw err;
  }
}
