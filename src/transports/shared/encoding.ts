import { isUtf8 } from 'node:buffer';
import { badRequest } from '../../core/errors.js';
import { decodeUtf8, Utf8Splitter } from '../../core/utf8.js';

const NOT_BASE64 = /[^A-Za-z0-9+/=]/;

/**
 * The language of /^[A-Za-z0-9+/]*={0,2}$/ (alphabet, then at most two `=` at the very end), tested
 * by a search for a stray character plus one indexOf: an anchored match with a trailing optional
 * group runs several times slower over a multi-megabyte string.
 */
function isBase64(s: string): boolean {
  if (NOT_BASE64.test(s)) return false;
  const pad = s.indexOf('=');
  return pad === -1 || pad === s.length - 1 || (pad === s.length - 2 && s.charCodeAt(s.length - 1) === 0x3d);
}

/**
 * Text fields that carry bytes (file content, exec stdin): utf8 as is, or base64 (whitespace such
 * as line wrapping allowed); malformed base64 is a bad_request naming `field`.
 */
export function decodeText(data: string, encoding: 'utf8' | 'base64' | undefined, field: string): Buffer {
  if (encoding !== 'base64') return Buffer.from(data, 'utf8');
  // Content without whitespace skips the copy.
  const clean = isBase64(data) ? data : data.replace(/\s+/g, '');
  if (!isBase64(clean) || clean.length % 4 === 1) throw badRequest(`${field} is not valid base64`);
  return Buffer.from(clean, 'base64');
}

/** How exec output travels in a JSON field: text, or base64 marked with `encoding` (the sbx `binary` extension). */
export interface EncodedOutput {
  data: string;
  encoding?: 'base64';
}

const asBase64 = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');

/**
 * A whole piece of exec output (a buffered result's stream): valid UTF-8 travels as text either
 * way; otherwise bad bytes become U+FFFD, or with `binary` it all travels base64, exactly.
 */
export function encodeOutput(bytes: Uint8Array, binary: boolean): EncodedOutput {
  if (!binary || isUtf8(bytes)) return { data: decodeUtf8(bytes) };
  return { data: asBase64(bytes), encoding: 'base64' };
}

/**
 * One output stream of an exec, chunk by chunk. A character split across chunks waits for its
 * last byte, so valid text always travels as text (the common case pays one native validation
 * pass and no copy). With `binary`, a chunk that is not valid UTF-8 goes base64 together with
 * any unfinished character at its end: the next chunk then starts clean, and can be text again.
 */
export class OutputEncoder {
  private readonly splitter = new Utf8Splitter();

  constructor(private readonly binary: boolean) {}

  /** The next piece to send; undefined when everything is waiting for more bytes. */
  write(chunk: Uint8Array): EncodedOutput | undefined {
    const complete = this.splitter.write(chunk);
    if (!this.binary || isUtf8(complete)) return complete.byteLength > 0 ? { data: decodeUtf8(complete) } : undefined;
    const rest = this.splitter.end();
    return { data: asBase64(rest.byteLength > 0 ? Buffer.concat([complete, rest]) : complete), encoding: 'base64' };
  }

  /** An unfinished character left at the end: U+FFFD, or its bytes with `binary`. */
  end(): EncodedOutput | undefined {
    const rest = this.splitter.end();
    return rest.byteLength > 0 ? encodeOutput(rest, this.binary) : undefined;
  }
}
