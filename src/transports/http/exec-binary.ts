/**
 * The binary writer of an exec stream (DESIGN.md §11): a frame per output chunk with its bytes as
 * they came (no UTF-8 decoding, no base64, no JSON), then one exit or error frame. A client asks for
 * it with `Accept: application/octet-stream`; the frame layout is in contracts/exec.ts.
 */
import { EXEC_FRAME, EXEC_FRAME_HEADER } from '../../contracts/exec-frames.js';
import { formatDuration } from '../../shared/duration.js';
import { isSbxError } from '../../core/errors.js';
import type { ExecItem } from '../../core/sandboxes/exec.js';

/** Whether a request's Accept header asks for the binary stream (and not NDJSON first). */
export function wantsBinaryStream(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept
    .split(',')
    .map((part) => part.split(';')[0]!.trim().toLowerCase())
    .some((type) => type === 'application/octet-stream');
}

/** Output up to this size goes out in one buffer with its frame header. */
const JOIN_MAX = 64 * 1024;

function header(id: number, length: number): Buffer {
  const h = Buffer.allocUnsafe(EXEC_FRAME_HEADER);
  h[0] = id;
  h.writeUInt32BE(length, 1);
  return h;
}

function jsonFrame(id: number, value: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(value));
  return Buffer.concat([header(id, body.byteLength), body]);
}

/** The frames of a whole stream; a failure after the headers went out becomes the error frame. */
export async function* binaryExecFrames(items: AsyncIterable<ExecItem>): AsyncGenerator<Uint8Array> {
  try {
    for await (const item of items) {
      if (item.stream === 'exit') {
        const exit: Record<string, unknown> = { exit_code: item.exit_code, duration: formatDuration(item.duration_ms) };
        if (item.timed_out) exit.timed_out = true;
        yield jsonFrame(EXEC_FRAME.exit, exit);
        return;
      }
      const size = item.data.byteLength;
      if (size === 0) continue;
      if (size <= JOIN_MAX) {
        // One write (one HTTP chunk, one syscall) per frame: copying a small chunk costs less.
        const frame = Buffer.allocUnsafe(EXEC_FRAME_HEADER + size);
        frame[0] = EXEC_FRAME[item.stream];
        frame.writeUInt32BE(size, 1);
        frame.set(item.data, EXEC_FRAME_HEADER);
        yield frame;
      } else {
        // Header and bytes go out as two writes: big output is never copied.
        yield header(EXEC_FRAME[item.stream], size);
        yield item.data;
      }
    }
  } catch (err) {
    const code = isSbxError(err) ? err.code : 'provider_error';
    const message = isSbxError(err) ? err.message : 'exec failed';
    yield jsonFrame(EXEC_FRAME.error, { code, message });
  }
}
