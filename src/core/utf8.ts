const decoder = new TextDecoder();

/**
 * UTF-8 bytes to text, invalid sequences as U+FFFD. TextDecoder's one-shot `decode` is the fast
 * path on Node 20 (`decode(chunk, {stream: true})` is several times slower), so callers that
 * decode a stream chunk by chunk cut it at character boundaries first (Utf8Splitter).
 */
export function decodeUtf8(bytes: Uint8Array): string {
  return bytes.byteLength > 0 ? decoder.decode(bytes) : '';
}

/**
 * Cuts a byte stream at UTF-8 character boundaries: a character split across chunks is carried
 * over to the next chunk, so every piece decodes (or validates) on its own. Bytes pass through
 * unchanged, invalid ones included.
 */
export class Utf8Splitter {
  private carry: Uint8Array | undefined;

  /** The bytes of every complete character so far (a view of `chunk` when nothing was carried). */
  write(chunk: Uint8Array): Uint8Array {
    let bytes = chunk;
    if (this.carry) {
      bytes = new Uint8Array(this.carry.byteLength + chunk.byteLength);
      bytes.set(this.carry);
      bytes.set(chunk, this.carry.byteLength);
      this.carry = undefined;
    }
    const complete = completePrefix(bytes);
    if (complete < bytes.byteLength) {
      this.carry = bytes.slice(complete);
      bytes = bytes.subarray(0, complete);
    }
    return bytes;
  }

  /** What is left: the start of a character that never completed (empty when none), and a fresh start. */
  end(): Uint8Array {
    const rest = this.carry ?? new Uint8Array(0);
    this.carry = undefined;
    return rest;
  }
}

/** Incremental UTF-8 decoding: a character split across chunks is carried over to the next chunk. */
export class Utf8Decoder {
  private readonly splitter = new Utf8Splitter();

  /** Text of every complete character so far; an incomplete last character waits for more bytes. */
  write(chunk: Uint8Array): string {
    return decodeUtf8(this.splitter.write(chunk));
  }

  /** What is left (an incomplete character decodes to U+FFFD), and a fresh start. */
  end(): string {
    return decodeUtf8(this.splitter.end());
  }
}

/** Length of the longest prefix of `b` that does not end inside a multi-byte character. */
export function completePrefix(b: Uint8Array): number {
  const n = b.byteLength;
  // A character is at most 4 bytes: look back at most 3 continuation bytes for its lead byte.
  for (let i = n - 1; i >= 0 && i >= n - 4; i--) {
    const x = b[i]!;
    if ((x & 0xc0) === 0x80) continue;
    const need = x >= 0xf0 ? 4 : x >= 0xe0 ? 3 : x >= 0xc0 ? 2 : 1;
    return n - i >= need ? n : i;
  }
  return n;
}
