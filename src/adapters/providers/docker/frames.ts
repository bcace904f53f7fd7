/**
 * Docker's multiplexed stream format (non-TTY attach, exec and logs): frames of an 8-byte header
 * `[stream, 0, 0, 0, size u32 BE]` followed by `size` bytes. Parsed incrementally without
 * re-concatenating what was already seen, so memory stays bounded by one socket chunk plus one
 * partial header.
 */

export interface Frame {
  stream: 'stdout' | 'stderr';
  data: Uint8Array;
}

const HEADER = 8;

/** Yields the frames of a multiplexed byte stream as they arrive; pulls only when the consumer does. */
export async function* demux(source: AsyncIterable<Uint8Array | string>): AsyncGenerator<Frame> {
  let header = Buffer.alloc(0);
  let stream: Frame['stream'] = 'stdout';
  let remaining = 0; // payload bytes still expected for the current frame
  for await (const raw of source) {
    let chunk = typeof raw === 'string' ? Buffer.from(raw) : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    while (chunk.length > 0) {
      if (remaining > 0) {
        const take = Math.min(remaining, chunk.length);
        // No copy: node hands every socket read a fresh buffer, never reused after it is emitted.
        yield { stream, data: chunk.subarray(0, take) };
        remaining -= take;
        chunk = chunk.subarray(take);
        continue;
      }
      const need = HEADER - header.length;
      header = Buffer.concat([header, chunk.subarray(0, need)]);
      chunk = chunk.subarray(need);
      if (header.length < HEADER) break;
      const kind = header[0];
      remaining = header.readUInt32BE(4);
      // 0 (stdin) never comes back; anything unknown is treated as stdout rather than dropped.
      stream = kind === 2 ? 'stderr' : 'stdout';
      header = Buffer.alloc(0);
    }
  }
}

/** Splits a complete (buffered) multiplexed payload, e.g. the body of a non-follow logs call. */
export function demuxBuffer(buf: Uint8Array): Frame[] {
  const out: Frame[] = [];
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let i = 0;
  while (i + HEADER <= b.length) {
    const size = b.readUInt32BE(i + 4);
    const kind = b[i];
    out.push({ stream: kind === 2 ? 'stderr' : 'stdout', data: b.subarray(i + HEADER, Math.min(b.length, i + HEADER + size)) });
    i += HEADER + size;
  }
  return out;
}
