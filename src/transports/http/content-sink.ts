import { isUtf8 } from 'node:buffer';
import { badRequest, SbxError } from '../../core/errors.js';

/** Below this a buffer is left to the garbage collector. */
const RELEASE_ABOVE = 1024 * 1024;

/**
 * Gives a large upload buffer's memory back now instead of at some later garbage collection (an
 * idle server may not collect for a long time): its ArrayBuffer is transferred into a message that
 * is dropped with its closed channel, which frees the bytes; every view of it becomes empty. Only
 * for buffers this module allocated whole (allocUnsafeSlow), once nothing reads them any more.
 */
export function releaseBuffer(view: Uint8Array | undefined): void {
  if (!view || view.buffer.byteLength < RELEASE_ABOVE || !(view.buffer instanceof ArrayBuffer)) return;
  const { port1, port2 } = new MessageChannel();
  try {
    port1.postMessage(null, [view.buffer]);
  } catch {
    // not transferable (pooled or already detached): the collector has it
  } finally {
    port1.close();
    port2.close();
  }
}

export const tooLarge = () => new SbxError('payload_too_large', 'request body is larger than the server accepts');
const notBase64 = () => badRequest('content is not valid base64');

/** A byte store that grows (doubling) up to `limit`; `hint` is its first size. */
export class Bytes {
  private buf: Buffer;
  len = 0;

  constructor(
    hint: number,
    private readonly limit: number,
  ) {
    this.buf = Buffer.allocUnsafeSlow(Math.max(64, Math.min(hint > 0 ? hint : 64 * 1024, limit)));
  }

  room(n: number): Buffer {
    const need = this.len + n;
    if (need > this.buf.length) {
      if (need > this.limit) throw tooLarge();
      const next = Buffer.allocUnsafeSlow(Math.min(this.limit, Math.max(need, this.buf.length * 2)));
      this.buf.copy(next, 0, 0, this.len);
      releaseBuffer(this.buf);
      this.buf = next;
    }
    return this.buf;
  }

  add(chunk: Buffer, start: number, end: number): void {
    if (end <= start) return;
    chunk.copy(this.room(end - start), this.len, start, end);
    this.len += end - start;
  }

  byte(b: number): void {
    this.room(1)[this.len++] = b;
  }

  result(): Buffer {
    return this.buf.subarray(0, this.len);
  }
}

const B64 = new Int8Array(256).fill(-1);
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
for (let i = 0; i < 64; i++) B64[ALPHABET.charCodeAt(i)] = i;
const EQ = 0x3d;
const isB64Space = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);
/** Decoded or re-encoded in slices of this many bytes (a multiple of 12). */
const SLICE = 192 * 1024;

/**
 * base64 text → bytes in the same buffer (output never overtakes input: 3 bytes per 4 characters).
 * The same language as decodeText: whitespace ignored, at most two `=` at the very end, and a
 * length (without whitespace) that is not 1 more than a multiple of 4.
 */
export function decodeBase64InPlace(buf: Buffer): Buffer {
  let w = 0;
  let pad = 0;
  for (let r = 0; r < buf.length; r++) {
    const c = buf[r]!;
    if (isB64Space(c)) continue;
    if (c === EQ) pad++;
    else if (B64[c]! < 0 || pad > 0) throw notBase64();
    buf[w++] = c;
  }
  if (pad > 2 || w % 4 === 1) throw notBase64();
  const chars = w - pad;
  let out = 0;
  for (let at = 0; at < chars; at += SLICE) {
    const end = Math.min(chars, at + SLICE);
    out += buf.write(buf.toString('latin1', at, end), out, 'base64');
  }
  return buf.subarray(0, out);
}

/**
 * Where the `content` string of a streamed file write goes, as its (unescaped) bytes arrive.
 * With `encoding: "base64"` seen before it, base64 is decoded as it streams; with no encoding seen
 * yet, base64-looking text is decoded on a guess (whole quads of the alphabet decode and re-encode
 * exactly, so the guess loses nothing) and turned back into text at the first character base64
 * would not have there; otherwise the text is kept as is. Either way the upload costs about its
 * decoded size once.
 */
export class ContentSink {
  private mode: 'text' | 'base64' | 'guess';
  private out: Bytes;
  private acc = 0;
  private quad = 0;
  private chars = 0;
  private pad = 0;
  private invalid = false;

  constructor(
    private readonly hint: number,
    private readonly limit: number,
    encoding: unknown,
  ) {
    this.mode = encoding === 'base64' ? 'base64' : encoding === undefined ? 'guess' : 'text';
    this.out = new Bytes(this.mode === 'text' ? hint : Math.ceil(hint / 4) * 3, limit);
  }

  /** Plain bytes of the string, copied as they are. */
  add(chunk: Buffer, start: number, end: number): void {
    if (this.mode === 'text') return this.out.add(chunk, start, end);
    for (let i = start; i < end; i++) {
      // A wrong guess turns the sink to text midway: the rest is copied at once.
      if ((this.mode as string) === 'text') return this.out.add(chunk, i, end);
      this.char(chunk[i]!);
    }
  }

  /** One code point from an escape (or U+FFFD for a lone surrogate). */
  codePoint(cp: number): void {
    if (this.mode !== 'text' && cp < 0x80) return this.char(cp);
    if (this.mode === 'base64') {
      this.invalid = true;
      return;
    }
    if (this.mode === 'guess') this.toText();
    const o = this.out;
    if (cp < 0x80) o.byte(cp);
    else if (cp < 0x800) {
      o.byte(0xc0 | (cp >> 6));
      o.byte(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      o.byte(0xe0 | (cp >> 12));
      o.byte(0x80 | ((cp >> 6) & 0x3f));
      o.byte(0x80 | (cp & 0x3f));
    } else {
      o.byte(0xf0 | (cp >> 18));
      o.byte(0x80 | ((cp >> 12) & 0x3f));
      o.byte(0x80 | ((cp >> 6) & 0x3f));
      o.byte(0x80 | (cp & 0x3f));
    }
  }

  private char(c: number): void {
    const v = B64[c]!;
    if (this.mode === 'base64') {
      if (isB64Space(c)) return;
      if (c === EQ) this.pad++;
      else if (v < 0 || this.pad > 0) this.invalid = true;
      else this.sextet(v);
      return;
    }
    // guess
    if (v >= 0 && this.pad === 0) return this.sextet(v);
    if (c === EQ && this.pad < 2) {
      this.pad++;
      return;
    }
    this.toText();
    this.out.byte(c);
  }

  private sextet(v: number): void {
    this.acc = (this.acc << 6) | v;
    this.chars++;
    if (++this.quad < 4) return;
    const b = this.out.room(3);
    const at = this.out.len;
    b[at] = this.acc >> 16;
    b[at + 1] = (this.acc >> 8) & 0xff;
    b[at + 2] = this.acc & 0xff;
    this.out.len += 3;
    this.acc = 0;
    this.quad = 0;
  }

  /** The guess was wrong: what was decoded goes back to the text it came from. */
  private toText(): void {
    const decoded = this.out.result();
    const text = new Bytes(Math.max(this.hint, Math.ceil(decoded.length / 3) * 4 + 8), this.limit);
    for (let at = 0; at < decoded.length; at += SLICE) {
      const part = Buffer.from(decoded.toString('base64', at, Math.min(decoded.length, at + SLICE)), 'latin1');
      text.add(part, 0, part.length);
    }
    for (let k = this.quad - 1; k >= 0; k--) text.byte(ALPHABET.charCodeAt((this.acc >> (6 * k)) & 0x3f));
    for (let k = 0; k < this.pad; k++) text.byte(EQ);
    releaseBuffer(decoded);
    this.out = text;
    this.mode = 'text';
    this.acc = this.quad = this.pad = 0;
  }

  /** The file's bytes for the body's final `encoding` (bad base64 → 400). */
  finish(encoding: unknown): Buffer {
    if (encoding === 'base64') {
      if (this.mode === 'text') return decodeBase64InPlace(this.out.result());
      if (this.invalid || this.pad > 2 || (this.chars + this.pad) % 4 === 1) throw notBase64();
      // A last partial quad: 2 characters are 1 byte, 3 are 2 (a single one decodes to nothing, as in Node).
      if (this.quad === 2) this.out.byte((this.acc >> 4) & 0xff);
      if (this.quad === 3) {
        this.out.byte((this.acc >> 10) & 0xff);
        this.out.byte((this.acc >> 2) & 0xff);
      }
      return this.out.result();
    }
    if (this.mode === 'base64') throw badRequest('invalid body: encoding is given more than once');
    if (this.mode === 'guess') this.toText();
    const text = this.out.result();
    // What JSON.parse would have made of bytes that are not UTF-8: U+FFFD.
    if (isUtf8(text)) return text;
    const fixed = Buffer.from(text.toString('utf8'), 'utf8');
    releaseBuffer(text);
    return fixed;
  }
}
