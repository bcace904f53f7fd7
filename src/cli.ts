/**
 * `sbx` entry: `main(argv, io)` parses, runs one command and returns its exit code. Nothing runs at
 * import time; the bin shim sets the process exit code from the returned value, in one place.
 */
import type { Readable } from 'node:stream';

export interface CliIo {
  stdout?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr?: NodeJS.WritableStream & { isTTY?: boolean };
  stdin?: Readable & { isTTY?: boolean };
  env?: Record<string, string | undefined>;
  cwd?: string;
  /**
   * Aborting it cancels the running command (follow modes, watch, serve). Without one, SIGINT and
   * SIGTERM of the process do, and the exit code is then 130 or 143.
   */
  signal?: AbortSignal;
}

/** Runs `sbx` with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[], io: CliIo = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const env = io.env ?? process.env;
  // Fast path: a bare `sbx --version` / `sbx -V` answers without loading commander and every command
  // module (start-up target: within 1.3 × `node -e 0`). Same output and exit code as commander's
  // version option; any other argv (extra flags, `--version` after a command) goes through commander.
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
    const { VERSION } = await import('./version.js');
    stdout.write(`${VERSION}\n`);
    return 0;
  }
  const [{ COMMANDS }, { buildProgram, commanderExit, CommanderError }] = await Promise.all([
    import('./transports/cli/registry.js'),
    import('./transports/cli/program.js'),
  ]);

  let selected: import('./transports/cli/program.js').Selected | undefined;
  const program = buildProgram(
    COMMANDS,
    { writeOut: (s) => void stdout.write(s), writeErr: (s) => void stderr.write(s), columns: stdout.columns },
    (s) => (selected = s),
  );
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return commanderExit(err);
    throw err;
  }
  if (!selected) return 0;
  const { spec, opts, globals } = selected;

  const [{ Output }, { runInvocation }] = await Promise.all([
    import('./transports/cli/output/output.js'),
    import('./transports/cli/run-command.js'),
  ]);
  const color = globals.color !== false && !env.NO_COLOR && env.TERM !== 'dumb';
  const out = new Output({ stdout, stderr, json: Boolean(globals.json), color });
  return runInvocation(
    {
      out,
      flags: globals,
      env,
      cwd: io.cwd ?? process.cwd(),
      stdin: io.stdin,
      signal: io.signal,
      useProfile: !spec.offline,
      stopsOnSignal: spec.stopsOnSignal,
    },
    (ctx) => spec.run!(ctx, opts),
  );
}
