/**
 * One framer for exec streams (issue 18): the NDJSON stream of the API, the WebSocket exec
 * messages and the worker RPC's NDJSON envelopes all turn exec items into the same frames —
 * output (text, or base64 marked with `encoding`), then one exit, or one error — and only write
 * them differently. The modes: `text` (valid UTF-8 as text, bad bytes as U+FFFD), `binary` (text
 * where valid, base64 where not: the sbx `binary` extension) and `base64` (always base64: the RPC).
 * The way in is here too: an exec request body (HTTP, or a WebSocket start) → core's ExecCommand.
 */
import type { ExecRequest } from '../../contracts/exec.js';
import { formatDuration } from '../../shared/duration.js';
import { isSbxError } from '../../core/errors.js';
import type { ExecCommand, ExecItem } from '../../core/sandboxes/exec.js';
import { decodeText, OutputEncoder, type EncodedOutput } from './encoding.js';

/**
 * The command an exec request body asks for, with the sbx `stdin` extension decoded: shared by the
 * HTTP exec and the WebSocket start message so both read a body the same way.
 */
export function execCommand(
  body: Pick<ExecRequest, 'command' | 'args' | 'env' | 'workdir' | 'timeout' | 'mode' | 'stdin' | 'stdin_encoding'>,
): ExecCommand {
  const stdin = body.stdin !== undefined ? decodeText(body.stdin, body.stdin_encoding, 'stdin') : undefined;
  return { command: body.command, args: body.args, env: body.env, workdir: body.workdir, timeout: body.timeout, mode: body.mode, stdin };
}

/** How output bytes become text on the wire (see the module comment). */
export type FrameMode = 'text' | 'binary' | 'base64';

/** One wire-neutral frame: each wire (NDJSON, WebSocket, RPC envelope) writes it its own way. */
export type ExecFrame =
  | { kind: 'output'; stream: 'stdout' | 'stderr'; data: string; encoding?: 'base64' }
  | { kind: 'exit'; exit_code: number | null; duration: string; timed_out?: true }
  | { kind: 'error'; code: string; message: string };

type Exit = Extract<ExecItem, { stream: 'exit' }>;

/** Frames one stream's items, keeping split UTF-8 characters per stream until they complete. */
export class ExecFramer {
  private readonly encoders: Record<'stdout' | 'stderr', OutputEncoder> | undefined;

  constructor(mode: FrameMode) {
    this.encoders =
      mode === 'base64' ? undefined : { stdout: new OutputEncoder(mode === 'binary'), stderr: new OutputEncoder(mode === 'binary') };
  }

  /** The frame for a chunk of output (none while a split character waits for its last byte). */
  output(stream: 'stdout' | 'stderr', data: Uint8Array): ExecFrame[] {
    if (!this.encoders)
      return data.byteLength > 0
        ? [
            {
              kind: 'output',
              stream,
              data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
              encoding: 'base64',
            },
          ]
        : [];
    return frame(stream, this.encoders[stream].write(data));
  }

  /** What is left of split characters, then the exit. */
  exit(item: Exit): ExecFrame[] {
    const exit: ExecFrame = { kind: 'exit', exit_code: item.exit_code, duration: formatDuration(item.duration_ms) };
    if (item.timed_out) exit.timed_out = true;
    return [...this.flush(), exit];
  }

  /** What is left, then the error (an SbxError's code and words; anything else a bare provider failure). */
  error(err: unknown, fallback = 'provider_error'): ExecFrame[] {
    const code = isSbxError(err) ? err.code : fallback;
    const message = isSbxError(err) ? err.message : fallback === 'internal' ? 'internal server error' : 'exec failed';
    return [...this.flush(), { kind: 'error', code, message }];
  }

  /** Frames for one item. */
  item(item: ExecItem): ExecFrame[] {
    return item.stream === 'exit' ? this.exit(item) : this.output(item.stream, item.data);
  }

  /** What is left of split characters (before a last message the caller frames itself). */
  flush(): ExecFrame[] {
    if (!this.encoders) return [];
    return [...frame('stdout', this.encoders.stdout.end()), ...frame('stderr', this.encoders.stderr.end())];
  }
}

function frame(stream: 'stdout' | 'stderr', out: EncodedOutput | undefined): ExecFrame[] {
  if (!out) return [];
  return [out.encoding ? { kind: 'output', stream, data: out.data, encoding: out.encoding } : { kind: 'output', stream, data: out.data }];
}

/** Frames of a whole stream: every item's frames, and one error frame if the stream fails. */
export async function* execFrames(
  items: AsyncIterable<ExecItem>,
  mode: FrameMode,
  onError?: (err: unknown) => boolean,
): AsyncGenerator<ExecFrame> {
  const framer = new ExecFramer(mode);
  try {
    for await (const item of items) {
      yield* framer.item(item);
      if (item.stream === 'exit') return;
    }
  } catch (err) {
    if (onError && !onError(err)) return;
    yield* framer.error(err);
  }
}
