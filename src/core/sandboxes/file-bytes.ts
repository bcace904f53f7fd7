/** Byte helpers of file bodies that core and every provider share: the size refusal, bodies read whole or sent at once. */
import { SbxError } from '../errors.js';
import type { OpenedFile } from '../ports/index.js';

/** The refusal of a file read over the file size limit, the same from core and every provider. */
export function fileTooLarge(size: number, max: number): SbxError {
  return new SbxError('payload_too_large', `file is ${size} bytes; the limit is ${max}`);
}

/** A streamed body's bytes in one array, for a provider without streamed writes; `hold` sees each chunk's size first. */
export async function collectBytes(body: AsyncIterable<Uint8Array>, hold?: (n: number) => Promise<void>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    await hold?.(chunk.byteLength);
    chunks.push(chunk);
    size += chunk.byteLength;
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** A body of bytes already read whole, for a provider without streaming reads. */
export async function* bytesOnce(data: Uint8Array): AsyncIterable<Uint8Array> {
  yield data;
}

/** An opened file's bytes in one array, copied once (not at all when they came in one piece). */
export async function readAll(file: OpenedFile): Promise<Uint8Array> {
  let out: Uint8Array | undefined;
  let at = 0;
  for await (const chunk of file.body) {
    if (at === 0 && chunk.byteLength === file.size) {
      out = chunk;
    } else {
      out ??= new Uint8Array(file.size);
      if (at < file.size) out.set(chunk.subarray(0, file.size - at), at);
    }
    at += chunk.byteLength;
  }
  return (out ?? new Uint8Array(0)).subarray(0, Math.min(at, file.size));
}
