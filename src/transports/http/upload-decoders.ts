/**
 * Streaming pieces of a JSON file upload (file-upload.ts): the `content` string's unescaped bytes
 * as a byte stream, and the two ways they become the file's bytes — base64 decoded, or UTF-8 text
 * kept as JSON.parse would have it — each emitting its output in slices as it goes, so no upload
 * is ever held whole.
 */
import { badRequest } from '../../core/errors.js';
import type { ContentTarget } from './file-write-body.js';

/** Where a stage's bytes go (it may keep them: every slice handed on is its own). */
export interface ByteSink {
  write(bytes: Buffer): void;
}

/** Decoded bytes are handed on in slices of this size. */
const SLICE = 64 * 1024;
const B64 = new Int8Array(256).fill(-1);
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
for (let i = 0; i < 64; i++) B64[ALPHABET.charCodeAt(i)] = i;
const EQ = 0x3d;
const isB64Space = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);
const notBase64 = () => badRequest('content is not valid base64');

/** The content string's bytes (escapes as UTF-8) into a byte sink: the scanner's target. */
export function rawText(sink: ByteSink): ContentTarget {
  return {
    add: (chunk, start, end) => {
      if (end > start) sink.write(chunk.subarray(start, end));
    },
    codePoint: (cp) => sink.write(Buffer.from(String.fromCodePoint(cp), 'utf8')),
  };
}

/** One byte stream into several sinks. */
export function tee(...sinks: ByteSink[]): ByteSink {
  return { write: (b) => sinks.forEach((s) => s.write(b)) };
}

/**
 * base64 text → bytes as it streams, in the language of decodeBase64InPlace: whitespace ignored, at
 * most two `=` at the very end, a length (without whitespace) that is not 1 more than a multiple of
 * 4. `guess`: a character base64 would not have marks the stream `failed` and ends its output
 * (the text was not base64 after all) instead of throwing.
 */
export class Base64Stream implements ByteSink {
  private acc = 0;
  private quad = 0;
  private chars = 0;
  private pad = 0;
  private bad = false;
  private out = Buffer.allocUnsafe(SLICE);
  private len = 0;

  constructor(
    private readonly next: ByteSink,
    private readonly guess = false,
  ) {}

  get failed(): boolean {
    return this.bad;
  }

  write(b: Buffer): void {
    if (this.bad) return;
    for (let i = 0; i < b.length; i++) {
      const c = b[i]!;
      const v = B64[c]!;
      if (v >= 0 && this.pad === 0) {
        this.acc = (this.acc << 6) | v;
        this.chars++;
        if (++this.quad === 4) {
          if (this.len + 3 > this.out.length) this.flush();
          const o = this.out;
          o[this.len] = this.acc >> 16;
          o[this.len + 1] = (this.acc >> 8) & 0xff;
          o[this.len + 2] = this.acc & 0xff;
          this.len += 3;
          this.acc = 0;
          this.quad = 0;
        }
      } else if (c === EQ) this.pad++;
      else if (!isB64Space(c)) {
        this.bad = true;
        if (!this.guess) throw notBase64();
        return;
      }
    }
    if (this.len >= SLICE / 2) this.flush();
  }

  /** The last partial quad, after checking the text was base64 as a whole. */
  end(): void {
    if (this.bad || this.pad > 2 || (this.chars + this.pad) % 4 === 1) throw notBase64();
    // 2 characters are 1 byte, 3 are 2 (a single one decodes to nothing, as in Node).
    if (this.len + 2 > this.out.length) this.flush();
    if (this.quad === 2) this.out[this.len++] = (this.acc >> 4) & 0xff;
    if (this.quad === 3) {
      this.out[this.len++] = (this.acc >> 10) & 0xff;
      this.out[this.len++] = (this.acc >> 2) & 0xff;
    }
    this.flush();
  }

  private flush(): void {
    if (this.len === 0) return;
    const slice = this.out.subarray(0, this.len);
    this.out = Buffer.allocUnsafe(SLICE);
    this.len = 0;
    this.next.write(slice);
  }
}

/** UTF-8 text kept as JSON.parse would have it: a sequence that is not UTF-8 becomes U+FFFD. */
export class Utf8Stream implements ByteSink {
  private readonly decoder = new TextDecoder('utf-8');

  constructor(private readonly next: ByteSink) {}

  write(b: Buffer): void {
    const text = this.decoder.decode(b, { stream: true });
    if (text !== '') this.next.write(Buffer.from(text, 'utf8'));
  }

  end(): void {
    const text = this.decoder.decode();
    if (text !== '') this.next.write(Buffer.from(text, 'utf8'));
  }
}

/** The file's bytes from raw content bytes read back (a spool), for the body's final `encoding`. */
export async function* decodeChunks(raw: AsyncIterable<Buffer>, encoding: unknown): AsyncGenerator<Uint8Array> {
  const out: Buffer[] = [];
  const sink: ByteSink = { write: (b) => out.push(b) };
  const stage = encoding === 'base64' ? new Base64Stream(sink) : new Utf8Stream(sink);
  for await (const chunk of raw) {
    stage.write(chunk);
    while (out.length > 0) yield out.shift()!;
  }
  stage.end();
  while (out.length > 0) yield out.shift()!;
}
