import { SbxError } from '../contracts/errors.js';

const NL = 0x0a;

/**
 * Splits a byte stream into parsed NDJSON values; a bad line is an `internal` error. Lines are cut
 * on the newline byte, which never occurs inside a multi-byte UTF-8 character, so each line is
 * decoded whole (no streaming decoder on the hot path of a large exec stream).
 */
export async function* parseNdjson<T>(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<T> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const data = pending.byteLength > 0 ? Buffer.concat([pending, bytes]) : bytes;
    let start = 0;
    for (let nl = data.indexOf(NL); nl !== -1; nl = data.indexOf(NL, start)) {
      const line = data.toString('utf8', start, nl).trim();
      start = nl + 1;
      if (line !== '') yield parseLine<T>(line);
    }
    // Copy the remainder: `data` may be a view of a chunk the stream reuses.
    pending = start < data.byteLength ? Buffer.from(data.subarray(start)) : Buffer.alloc(0);
  }
  const last = pending.toString('utf8').trim();
  if (last !== '') yield parseLine<T>(last);
}

function parseLine<T>(line: string): T {
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new SbxError('internal', `malformed stream line from server: ${line.slice(0, 80)}`);
  }
}
