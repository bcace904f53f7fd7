import { SbxError } from '../../../core/errors.js';

/**
 * A streaming `multipart/form-data` reader (RFC 7578) for envd's `/files` uploads: parts come one
 * after another, each with its body as a stream that ends at the next boundary, so a file goes into
 * the sandbox as it arrives and no more than a chunk plus a boundary is held. Bounded: part headers
 * ≤ 16 KiB, the preamble ≤ 64 KiB, at most 1,000 parts; a malformed body → 400.
 */

const MAX_HEADER_BYTES = 16 * 1024;
const MAX_PREAMBLE_BYTES = 64 * 1024;
const MAX_PARTS = 1000;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

export interface Part {
  /** The form field's name (`file` for envd's uploads). */
  name: string | null;
  filename: string | null;
  /** The part's bytes; read it to the end (or not: the next part drains what is left). */
  body: AsyncIterable<Uint8Array>;
}

const bad = (why: string) => new SbxError('bad_request', `the multipart body could not be read: ${why}`);

/** The boundary of a `multipart/form-data` content type (quoted or not, 1–70 characters), else 400. */
export function boundaryOf(contentType: string): string {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  const b = m?.[1] ?? m?.[2];
  if (!b) throw bad('no boundary in the content type');
  return b;
}

class Reader {
  buf: Buffer;
  private ended = false;
  constructor(
    private readonly it: AsyncIterator<Uint8Array>,
    first: Buffer,
  ) {
    this.buf = first;
  }
  /** Appends the next chunk; false at the end of the body. */
  async more(): Promise<boolean> {
    if (this.ended) return false;
    const r = await this.it.next();
    if (r.done) {
      this.ended = true;
      return false;
    }
    this.buf = this.buf.length === 0 ? Buffer.from(r.value) : Buffer.concat([this.buf, r.value]);
    return true;
  }
  async need(n: number, where: string): Promise<void> {
    while (this.buf.length < n) if (!(await this.more())) throw bad(`it ended ${where}`);
  }
  /** Drops everything up to and including `mark`, reading at most `max` bytes before it. */
  async skipPast(mark: Buffer, max: number, where: string): Promise<void> {
    for (;;) {
      const i = this.buf.indexOf(mark);
      if (i >= 0) {
        if (i > max) throw bad(`${where} is longer than ${max} bytes`);
        this.buf = this.buf.subarray(i + mark.length);
        return;
      }
      if (this.buf.length > max + mark.length) throw bad(`${where} is longer than ${max} bytes`);
      if (!(await this.more())) throw bad(`it ended in ${where}`);
    }
  }
  async close(): Promise<void> {
    await this.it.return?.();
  }
}

/** The parts of a multipart body, in order. The caller reads each part's body before asking for the next (or lets it be drained). */
export async function* multipartParts(src: AsyncIterable<Uint8Array>, boundary: string): AsyncGenerator<Part> {
  const delim = Buffer.from(`\r\n--${boundary}`);
  // The first boundary has no CRLF before it: one is put in front so every boundary looks the same.
  const r = new Reader(src[Symbol.asyncIterator](), Buffer.from(CRLF));
  try {
    await r.skipPast(delim, MAX_PREAMBLE_BYTES, 'the preamble');
    for (let count = 0; ; count++) {
      await r.need(2, 'after a boundary');
      if (r.buf[0] === 0x2d && r.buf[1] === 0x2d) return; // `--`: the last boundary; the epilogue is not read
      if (count >= MAX_PARTS) throw bad(`more than ${MAX_PARTS} parts`);
      await r.skipPast(CRLF, 64, 'the boundary line');
      const headers = await readHeaders(r);
      const disposition = dispositionOf(headers);
      let finished = false;
      const body = (async function* (): AsyncGenerator<Uint8Array> {
        const keep = delim.length - 1;
        for (;;) {
          const i = r.buf.indexOf(delim);
          if (i >= 0) {
            const out = r.buf.subarray(0, i);
            r.buf = r.buf.subarray(i + delim.length);
            finished = true;
            if (out.length > 0) yield out;
            return;
          }
          if (r.buf.length > keep) {
            const out = r.buf.subarray(0, r.buf.length - keep);
            r.buf = r.buf.subarray(r.buf.length - keep);
            yield out;
          }
          if (!(await r.more())) throw bad('it ended inside a part');
        }
      })();
      yield { ...disposition, body };
      // What the caller left of this part is read past, never kept.
      if (!finished) for await (const _ of body);
    }
  } finally {
    await r.close();
  }
}

/** A part's header block (empty when the part has none), bounded, read past its blank line. */
async function readHeaders(r: Reader): Promise<string> {
  await r.need(2, 'in part headers');
  if (r.buf.subarray(0, 2).equals(CRLF)) {
    r.buf = r.buf.subarray(2);
    return '';
  }
  for (;;) {
    const end = r.buf.indexOf(HEADER_END);
    if (end > MAX_HEADER_BYTES || (end < 0 && r.buf.length > MAX_HEADER_BYTES))
      throw bad(`part headers longer than ${MAX_HEADER_BYTES} bytes`);
    if (end >= 0) {
      const text = r.buf.subarray(0, end).toString('utf8');
      r.buf = r.buf.subarray(end + HEADER_END.length);
      return text;
    }
    if (!(await r.more())) throw bad('it ended in part headers');
  }
}

/** `Content-Disposition: form-data; name="…"; filename="…"` of one part's headers. */
function dispositionOf(headers: string): { name: string | null; filename: string | null } {
  for (const line of headers.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== 'content-disposition') continue;
    const value = line.slice(colon + 1);
    return { name: param(value, 'name'), filename: param(value, 'filename') };
  }
  return { name: null, filename: null };
}

/** A parameter of a header value: a quoted string (backslash escapes undone) or a token. */
function param(value: string, key: string): string | null {
  const re = new RegExp(`;\\s*${key}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i');
  const m = re.exec(value);
  if (!m) return null;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] ?? null);
}
