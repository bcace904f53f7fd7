/** Running a WebSocket exec session from the CLI: local stdin in, output out, one exit status. */
import type { ExecSession, ExecWsMessage } from '../../../client/index.js';
import { ERROR_CODES, type ErrorCode, SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import type { StreamOutput } from '../output/stream-output.js';
import { messageFor } from '../errors.js';
import { EXIT } from '../exit-codes.js';

/**
 * Codes the server reports before the command runs (lookups, ownership, limits, a bad request):
 * mapped to sbx's own exit codes like the same error of the HTTP exec. Any other error, or one
 * after output, is "sbx failed while the command ran" (125).
 */
const BEFORE_START: ReadonlySet<string> = new Set(['bad_request', 'unauthorized', 'forbidden', 'not_found', 'resource_limit', 'conflict']);

function keys(ctx: CliContext) {
  return { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) };
}

/** The exit status for a sandbox command's code (125 when the code is not a usable status). */
export function exitStatus(ctx: { out: Pick<StreamOutput, 'error'> }, code: number | null | undefined): number {
  if (code === null) {
    ctx.out.error("the sandbox's provider reported no exit status");
    return EXIT.execFailed;
  }
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 0 || code > 255) {
    ctx.out.error(`the sandbox reported an unusable exit code ${JSON.stringify(code)}`);
    return EXIT.execFailed;
  }
  return code;
}

/**
 * The bytes of one output message or chunk: base64 ones decoded, text as is. The CLI always asks
 * for `binary` output, so what it writes locally is what the command wrote, byte for byte.
 */
export function outputBytes(msg: { data: string; encoding?: 'base64' }): string | Buffer {
  return msg.encoding === 'base64' ? Buffer.from(msg.data, 'base64') : msg.data;
}

/** Readable side of a local stream as `sbx` sees stdin. */
type Input = NodeJS.ReadableStream & { pause(): unknown; resume(): unknown };

/**
 * Forwards `input` into the session chunk by chunk as it arrives (one chunk in flight, so a slow
 * command slows the reader), `end` → stdin_eof. Returns a stop function that detaches without
 * closing the stream.
 */
export function forwardStdin(input: Input, session: ExecSession, opts: { eof?: boolean } = {}): () => void {
  let stopped = false;
  const onData = (chunk: Buffer | string) => {
    if (stopped) return;
    input.pause();
    void session.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk).then(() => {
      if (!stopped) input.resume();
    });
  };
  const onEnd = () => {
    if (!stopped && opts.eof !== false) session.end();
  };
  input.on('data', onData);
  input.once('end', onEnd);
  input.once('error', onEnd);
  input.resume();
  return () => {
    if (stopped) return;
    stopped = true;
    input.removeListener('data', onData);
    input.removeListener('end', onEnd);
    input.removeListener('error', onEnd);
    input.pause();
  };
}

/**
 * Prints the session's output as it comes and returns sbx's exit status: the command's code, 124
 * on its deadline, 125 when sbx failed while it ran. Errors before the command ran are thrown (the
 * caller maps them to exit codes as for any request).
 */
export async function printSession(ctx: CliContext, session: ExecSession): Promise<number> {
  let exit: Extract<ExecWsMessage, { type: 'exit' }> | undefined;
  let failure: Extract<ExecWsMessage, { type: 'error' }> | undefined;
  let output = false;
  try {
    for await (const msg of session) {
      if (msg.type === 'stdout' || msg.type === 'stderr') {
        output = true;
        await ctx.out.raw(msg.type, outputBytes(msg));
      } else if (msg.type === 'exit') {
        exit = msg;
      } else if (msg.type === 'error') {
        failure = msg;
      }
    }
  } catch (err) {
    // Cancelled (Ctrl-C): the command was killed on purpose; main() reports the signal's exit code.
    if (ctx.signal.aborted) return EXIT.execFailed;
    ctx.out.error(`exec failed while the command ran: ${messageFor(err, keys(ctx))}`);
    return EXIT.execFailed;
  } finally {
    session.close();
  }
  if (failure) {
    if (!output && BEFORE_START.has(failure.code)) {
      const code: ErrorCode = (ERROR_CODES as readonly string[]).includes(failure.code) ? (failure.code as ErrorCode) : 'internal';
      throw new SbxError(code, failure.message);
    }
    ctx.out.error(`exec failed while the command ran: ${failure.message}`);
    return EXIT.execFailed;
  }
  if (!exit) {
    if (ctx.signal.aborted) return EXIT.execFailed;
    ctx.out.error('exec stream ended without an exit status');
    return EXIT.execFailed;
  }
  if (exit.timed_out) return EXIT.execTimeout;
  return exitStatus(ctx, exit.exit_code);
}

/** True when an upgrade refusal means the server has no WebSocket exec (an older sbx). */
export function noWebSocketRoute(err: unknown): boolean {
  return err instanceof SbxError && err.details?.status === 404;
}
