import { SbxError } from '../contracts/errors.js';

const NL = 0x0a;
const EMPTY = new Uint8Array(0);
const utf8 = new TextDecoder();
const encoder = new TextEncoder();

/**
 * Splits a byte stream into parsed NDJSON values; a bad line is an `internal` error. Lines are cut
 * on the newline byte, which never occurs inside a multi-byte UTF-8 character, so each line is
 * decoded whole (no streaming decoder on the hot path of a large exec stream). Plain Uint8Array and
 * TextDecoder: runs in browsers as in Node.
 */
export async function* parseNdjson<T>(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<T> {
  let pending: Uint8Array = EMPTY;
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
    const data = pending.byteLength > 0 ? concat(pending, bytes) : bytes;
    let start = 0;
    for (let nl = data.indexOf(NL); nl !== -1; nl = data.indexOf(NL, start)) {
      const line = utf8.decode(data.subarray(start, nl)).trim();
      start = nl + 1;
      if (line !== '') yield parseLine<T>(line);
    }
    // Copy the remainder: `data` may be a view of a chunk the stream reuses (and a Buffer's slice()
    // is a view too, hence the copying constructor).
    pending = start < data.byteLength ? new Uint8Array(data.subarray(start)) : EMPTY;
  }
  const last = utf8.decode(pending).trim();
  if (last !== '') yield parseLine<T>(last);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

function parseLine<T>(line: string): T {
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new SbxError('internal', `malformed stream line from server: ${line.slice(0, 80)}`);
  }
}
