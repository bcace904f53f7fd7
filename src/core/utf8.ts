/**
 * Incremental UTF-8 decoding on TextDecoder's fast one-shot path: a character split across chunks
 * is carried over to the next chunk by hand. (`decode(chunk, {stream: true})` is several times
 * slower on Node 20, and exec output goes through here chunk by chunk.)
 */
export class Utf8Decoder {
  private readonly decoder = new TextDecoder();
  private carry: Uint8Array | undefined;

  /** Text of every complete character so far; an incomplete last character waits for more bytes. */
  write(chunk: Uint8Array): string {
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
    return bytes.byteLength > 0 ? this.decoder.decode(bytes) : '';
  }

  /** What is left (an incomplete character decodes to U+FFFD), and a fresh start. */
  end(): string {
    const rest = this.carry;
    this.carry = undefined;
    return rest ? this.decoder.decode(rest) : '';
  }
}

/** Length of the longest prefix of `b` that does not end inside a multi-byte character. */
function completePrefix(b: Uint8Array): number {
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
