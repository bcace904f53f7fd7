import { describe, expect, it } from 'vitest';
import { boundaryOf, multipartParts } from '../../src/transports/e2b/envd/multipart.js';

/** envd's streaming multipart reader (src/transports/e2b/envd/multipart.ts): parts, split points, bounds. */

const B = 'sbxBoundary0123';

function body(parts: Array<{ headers: string; data: Buffer }>, preamble = '', epilogue = ''): Buffer {
  const chunks: Buffer[] = [Buffer.from(preamble)];
  for (const p of parts) chunks.push(Buffer.from(`--${B}\r\n${p.headers}\r\n\r\n`), p.data, Buffer.from('\r\n'));
  chunks.push(Buffer.from(`--${B}--\r\n${epilogue}`));
  return Buffer.concat(chunks);
}

const file = (filename: string, data: Buffer | string) => ({
  headers: `Content-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream`,
  data: Buffer.from(data),
});

async function* split(buf: Buffer, sizes: number[]): AsyncGenerator<Uint8Array> {
  let at = 0;
  for (let i = 0; at < buf.length; i++) {
    const n = sizes[i % sizes.length]!;
    yield buf.subarray(at, at + n);
    at += n;
  }
}

async function read(src: AsyncIterable<Uint8Array>): Promise<Array<{ name: string | null; filename: string | null; data: Buffer }>> {
  const out = [];
  for await (const p of multipartParts(src, B)) {
    const chunks: Uint8Array[] = [];
    for await (const c of p.body) chunks.push(c);
    out.push({ name: p.name, filename: p.filename, data: Buffer.concat(chunks) });
  }
  return out;
}

describe('multipart reader', () => {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  // Bytes that look like a boundary but are not one, and CRLFs at the edges.
  const tricky = Buffer.from(`\r\n--${B.slice(0, -1)}x\r\n--\r\n`);
  const parts = [file('/a/1.bin', all), file('two.txt', 'two'), file('empty', ''), file('/t', tricky)];
  const whole = body(parts, 'preamble\r\n', 'epilogue');

  it('reads every part whatever the chunk sizes', async () => {
    for (const sizes of [[whole.length], [1], [2, 3], [7], [17, 1, 64], [B.length + 3]]) {
      const got = await read(split(whole, sizes));
      expect(
        got.map((p) => p.filename),
        String(sizes),
      ).toEqual(['/a/1.bin', 'two.txt', 'empty', '/t']);
      expect(got[0]!.data.equals(all)).toBe(true);
      expect(got[1]!.data.toString()).toBe('two');
      expect(got[2]!.data.length).toBe(0);
      expect(got[3]!.data.equals(tricky)).toBe(true);
      expect(got.every((p) => p.name === 'file')).toBe(true);
    }
  });

  it('streams: a part is handed out before the body has ended', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Up to the closing boundary itself (a part ends where the next boundary begins), without its `--`.
    const first = body([file('f', 'first')]).subarray(0, -'--\r\n'.length);
    async function* src() {
      yield first;
      await gate;
      yield Buffer.from('--\r\n');
    }
    const it = multipartParts(src(), B)[Symbol.asyncIterator]();
    const p = (await it.next()).value!;
    const chunks: Uint8Array[] = [];
    for await (const c of p.body) chunks.push(c);
    expect(Buffer.concat(chunks).toString()).toBe('first');
    release();
    expect((await it.next()).done).toBe(true);
  });

  it('a part left unread is drained; unescapes quoted names; other fields', async () => {
    const b = body([{ headers: 'Content-Disposition: form-data; name="meta"', data: Buffer.from('x') }, file('with \\"quote\\".txt', 'q')]);
    const names: Array<string | null> = [];
    for await (const p of multipartParts(split(b, [5]), B)) names.push(p.filename ?? p.name);
    expect(names).toEqual(['meta', 'with "quote".txt']);
  });

  it('refuses malformed and unbounded bodies with 400', async () => {
    const cases: Array<[Buffer, RegExp]> = [
      [Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"\r\n\r\nno end`), /ended inside a part/],
      [Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"`), /ended in part headers/],
      [Buffer.from('no boundary at all'), /ended in the preamble/],
      [Buffer.concat([Buffer.alloc(70_000, 0x61), Buffer.from(`\r\n--${B}--`)]), /preamble is longer/],
      [Buffer.from(`--${B}\r\nX: ${'h'.repeat(17_000)}\r\n\r\nx\r\n--${B}--`), /headers longer/],
      [Buffer.from(`--${B}\r\n` + `\r\n\r\n--${B}\r\n`.repeat(1001)), /more than 1000 parts/],
    ];
    for (const [b, message] of cases) {
      const err = await read(split(b, [4096])).catch((e: unknown) => e);
      expect(err, message.source).toMatchObject({ code: 'bad_request', message: expect.stringMatching(message) });
    }
  });

  it('finds the boundary in the content type', () => {
    expect(boundaryOf(`multipart/form-data; boundary=${B}`)).toBe(B);
    expect(boundaryOf('multipart/form-data; charset=utf-8; boundary="a b"')).toBe('a b');
    expect(() => boundaryOf('multipart/form-data')).toThrow(/no boundary/);
  });
});
