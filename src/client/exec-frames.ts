/**
 * The reader of the binary exec stream (DESIGN.md §11; layout in contracts/exec.ts): raw output
 * chunks, then the exit (or sbx's own failure as an exit with `error`). Plain Uint8Array and
 * DataView, so it runs in browsers as in Node; output frames that sit inside one network chunk are
 * handed on as views, without a copy.
 */
import { SbxError } from '../contracts/errors.js';
import { EXEC_FRAME, EXEC_FRAME_HEADER } from '../contracts/exec-frames.js';
import { base64ToBytes } from './base64.js';

/** One item of a byte-exact exec stream. */
export type ExecBytesChunk =
  | { stream: 'stdout' | 'stderr'; data: Uint8Array }
  // exit_code null: the provider reported no exit status (a custom HTTP backend without an exit line).
  | { stream: 'exit'; exit_code: number | null; duration?: string; timed_out?: boolean; error?: { code: string; message: string } };

const utf8 = new TextDecoder();
/** Frames longer than this are refused as corrupt (the server never sends output chunks near it). */
const MAX_FRAME = 64 * 1024 * 1024;

export async function* parseExecFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<ExecBytesChunk> {
  let pending: Uint8Array = new Uint8Array(0);
  for await (const chunk of body) {
    let data = pending.byteLength > 0 ? concat(pending, chunk) : chunk;
    let at = 0;
    while (data.byteLength - at >= EXEC_FRAME_HEADER) {
      const id = data[at]!;
      const length = new DataView(data.buffer, data.byteOffset + at + 1, 4).getUint32(0);
      if (length > MAX_FRAME) throw new SbxError('internal', `malformed exec frame from server (length ${length})`);
      if (data.byteLength - at - EXEC_FRAME_HEADER < length) break;
      const payload = data.subarray(at + EXEC_FRAME_HEADER, at + EXEC_FRAME_HEADER + length);
      at += EXEC_FRAME_HEADER + length;
      if (id === EXEC_FRAME.stdout || id === EXEC_FRAME.stderr) {
        yield { stream: id === EXEC_FRAME.stdout ? 'stdout' : 'stderr', data: payload };
      } else if (id === EXEC_FRAME.exit) {
        yield { stream: 'exit', ...(parseJson(payload) as { exit_code: number | null; duration?: string; timed_out?: boolean }) };
        return;
      } else if (id === EXEC_FRAME.error) {
        const error = parseJson(payload) as { code: string; message: string };
        yield { stream: 'exit', exit_code: 125, error };
        return;
      } else {
        throw new SbxError('internal', `malformed exec frame from server (stream id ${id})`);
      }
    }
    // Keep the unread tail as a copy: the chunk it views may be reused by the stream.
    pending = at < data.byteLength ? new Uint8Array(data.subarray(at)) : new Uint8Array(0);
    data = pending;
  }
  if (pending.byteLength > 0) throw new SbxError('internal', 'exec stream from server ended inside a frame');
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch {
    throw new SbxError('internal', 'malformed exec frame from server (bad JSON)');
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

/** An NDJSON chunk (from a server without the binary stream, asked with `binary: true`) as bytes. */
export function ndjsonToBytes(chunk: {
  stream: 'stdout' | 'stderr' | 'exit';
  data: string;
  encoding?: 'base64';
  exit_code?: number | null;
  duration?: string;
  timed_out?: boolean;
  error?: { code: string; message: string };
}): ExecBytesChunk {
  if (chunk.stream === 'exit') {
    const exit: ExecBytesChunk = { stream: 'exit', exit_code: chunk.exit_code ?? null };
    if (chunk.duration !== undefined) exit.duration = chunk.duration;
    if (chunk.timed_out) exit.timed_out = true;
    if (chunk.error) exit.error = chunk.error;
    return exit;
  }
  return { stream: chunk.stream, data: chunk.encoding === 'base64' ? base64ToBytes(chunk.data) : new TextEncoder().encode(chunk.data) };
}
