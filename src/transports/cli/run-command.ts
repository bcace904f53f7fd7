/**
 * Runs one command's handler against a context and turns what it throws into the one-line message
 * and the exit code (DESIGN.md §5). `main()` calls it with the real context; tests call it with a
 * fake one (test/helpers/cli-context.ts), in process, with no child process or argv parsing.
 */
import type { CliContext } from './context.js';
import { exitCodeFor, messageFor } from './errors.js';
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
