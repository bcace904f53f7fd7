/**
 * Runs one command's handler against a context and turns what it throws into the one-line message
 * and the exit code (DESIGN.md §5). `main()` and the `sbx exec` fast path (fast-exec.ts) run a
 * command through `runInvocation`; tests call `runCommand` with a fake context
 * (test/helpers/cli-context.ts), in process, with no child process or argv parsing.
 */
import { homedir } from 'node:os';
import type { Readable } from 'node:stream';
import type { Transport } from '../../client/transport.js';
import type { Env, GlobalFlags } from './client-config.js';
import { type CliContext, createContext, type StdinSource } from './context.js';
import { exitCodeFor, messageFor } from './errors.js';
import type { StreamOutput } from './output/stream-output.js';
import { cancelOnSignals, signalExitCode } from './signals.js';
import type { CommandSpec } from './spec.js';

export async function runCommand(spec: CommandSpec, ctx: CliContext, opts: Record<string, unknown>): Promise<number> {
  try {
    return await spec.run!(ctx, opts);
  } catch (err) {
    const message = failureMessage(err, ctx);
    if (message) ctx.out.error(message);
    return exitCodeFor(err);
  }
}

/** The `sbx: …` line for a failure; never a key (only whether one was given). */
export function failureMessage(err: unknown, ctx: Pick<CliContext, 'config'> | undefined): string {
  const keys = { apiKey: Boolean(ctx?.config.apiKey), adminKey: Boolean(ctx?.config.adminKey) };
  const problems = (err as { problems?: unknown }).problems;
  return Array.isArray(problems) ? `invalid configuration: ${problems.join('; ')}` : messageFor(err, keys);
}

/** One run of a command as a process runs it. */
export interface Invocation<O extends StreamOutput> {
  out: O;
  flags: GlobalFlags;
  env: Env;
  cwd: string;
  /** Local stdin; process.stdin (touched only when the command reads it) when absent. */
  stdin?: Readable & { isTTY?: boolean };
  /** Cancels the run; without one, SIGINT and SIGTERM of the process do (exit 130, 143). */
  signal?: AbortSignal;
  /** False for commands that never call the server: the client profile is not read. */
  useProfile: boolean;
  /** The command stops on a signal by itself and returns its own code (serve, follow modes). */
  stopsOnSignal?: boolean;
  /** How the client's requests travel (the `sbx exec` fast path's own); the client's default when absent. */
  transport?: Transport;
}

/**
 * Builds the context (client settings, client, cancel signal), runs `run` and returns the exit code:
 * its code; 128 + the signal's number when a signal cancelled it; else the mapped code of what it
 * threw, after printing the one error line. Releases the client and flushes the output.
 */
export async function runInvocation<O extends StreamOutput>(
  inv: Invocation<O>,
  run: (ctx: CliContext<O>) => Promise<number>,
): Promise<number> {
  const { out, env } = inv;
  let ctx: Awaited<ReturnType<typeof createContext<O>>> | undefined;
  const cancel = inv.signal ? undefined : cancelOnSignals();
  // A command cancelled by a signal exits 128 + its number, whatever it returned or threw.
  const interrupted = () => {
    const sig = inv.stopsOnSignal ? undefined : cancel?.caught();
    return sig === undefined ? undefined : signalExitCode(sig);
  };
  try {
    ctx = await createContext({
      out,
      flags: inv.flags,
      env,
      cwd: inv.cwd,
      home: env.HOME || homedir(),
      stdin: stdinSource(inv.stdin),
      signal: inv.signal ?? cancel!.signal,
      useProfile: inv.useProfile,
      transport: inv.transport,
    });
    const code = await run(ctx);
    return interrupted() ?? code;
  } catch (err) {
    const stopped = interrupted();
    if (stopped !== undefined) return stopped;
    const message = failureMessage(err, ctx);
    if (message) out.error(message);
    return exitCodeFor(err);
  } finally {
    cancel?.dispose();
    await ctx?.close();
    await out.flush();
  }
}

/** Local stdin for a command: `process.stdin` is created only when a command reads it. */
function stdinSource(given: (Readable & { isTTY?: boolean }) | undefined): StdinSource {
  return {
    get stream() {
      return given ?? process.stdin;
    },
    get isTTY() {
      return Boolean((given ?? process.stdin).isTTY);
    },
  };
}
