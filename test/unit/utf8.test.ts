import { describe, expect, it } from 'vitest';
import { parseNdjson } from '../../src/client/ndjson.js';
import { Utf8Decoder, Utf8Splitter } from '../../src/core/utf8.js';
import { OutputEncoder, type EncodedOutput } from '../../src/transports/shared/encoding.js';
import { ConsoleRing } from '../../src/adapters/providers/shared/console-ring.js';

// One, two, three and four bytes per character, and a line break between them.
const TEXT = 'a\u00e9\u20ac\u{1f600}z\n\u00df\u{10348}!';
const BYTES = Buffer.from(TEXT);

async function* chunks(parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield p;
}

/** Every way to cut `b` into two pieces, plus byte-by-byte. */
function splits(b: Buffer): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  for (let i = 0; i <= b.length; i++) out.push([b.subarray(0, i), b.subarray(i)]);
  out.push([...b].map((x) => Uint8Array.of(x)));
  return out;
}

describe('Utf8Decoder', () => {
  it('decodes characters split across chunks at every byte position', () => {
    for (const parts of splits(BYTES)) {
      const d = new Utf8Decoder();
      const text = parts.map((p) => d.write(p)).join('') + d.end();
      expect(text).toBe(TEXT);
    }
  });

  it('holds back an incomplete character until its last byte arrives', () => {
    const d = new Utf8Decoder();
    const euro = Buffer.from('\u20ac');
    expect(d.write(euro.subarray(0, 1))).toBe('');
    expect(d.write(euro.subarray(1, 2))).toBe('');
    expect(d.write(euro.subarray(2))).toBe('\u20ac');
  });

  it('ends an incomplete character as U+FFFD and starts fresh', () => {
    const d = new Utf8Decoder();
    expect(d.write(Buffer.from('x\u20ac').subarray(0, 2))).toBe('x');
    expect(d.end()).toBe('\ufffd');
    expect(d.write(Buffer.from('ok'))).toBe('ok');
    expect(d.end()).toBe('');
  });

  it('replaces invalid bytes as TextDecoder does', () => {
    const bad = Uint8Array.of(0x61, 0xff, 0x62, 0xc3);
    const d = new Utf8Decoder();
    expect(d.write(bad) + d.end()).toBe(new TextDecoder().decode(bad));
  });
});

describe('Utf8Splitter', () => {
  it('hands out whole characters only, bytes unchanged, at every split', () => {
    for (const parts of splits(BYTES)) {
      const sp = new Utf8Splitter();
      const pieces = parts.map((p) => Buffer.from(sp.write(p)));
      for (const piece of pieces) expect(new TextDecoder('utf-8', { fatal: true }).decode(piece)).toBeTypeOf('string');
      expect(Buffer.concat([...pieces, sp.end()]).equals(BYTES)).toBe(true);
    }
  });

  it('ends with the bytes of an unfinished character', () => {
    const sp = new Utf8Splitter();
    expect([...sp.write(Uint8Array.of(0x61, 0xe2, 0x82))]).toEqual([0x61]);
    expect([...sp.end()]).toEqual([0xe2, 0x82]);
    expect(sp.end().byteLength).toBe(0);
  });
});

describe('OutputEncoder', () => {
  const bytesOf = (outs: Array<EncodedOutput | undefined>) =>
    Buffer.concat(
      outs
        .filter((o): o is EncodedOutput => o !== undefined)
        .map((o) => (o.encoding === 'base64' ? Buffer.from(o.data, 'base64') : Buffer.from(o.data))),
    );
  const run = (enc: OutputEncoder, parts: Uint8Array[]) => [...parts.map((p) => enc.write(p)), enc.end()];
  const RAW = Buffer.from([0x00, 0xff, 0xfe, 0x20, 0x72, 0x61, 0x77, 0xc3]);

  it('valid UTF-8 stays text with binary, however it is cut', () => {
    for (const parts of splits(BYTES)) {
      const outs = run(new OutputEncoder(true), parts);
      expect(outs.every((o) => o === undefined || o.encoding === undefined)).toBe(true);
      expect(outs.map((o) => o?.data ?? '').join('')).toBe(TEXT);
    }
  });

  it('with binary, any bytes arrive exactly, however they are cut', () => {
    const mixed = Buffer.concat([BYTES, RAW, BYTES, Buffer.from([0xe2, 0x82])]);
    for (const parts of splits(mixed)) expect(bytesOf(run(new OutputEncoder(true), parts)).equals(mixed)).toBe(true);
  });

  it('sends an unfinished character with the bad bytes before it, so what follows is text again', () => {
    const enc = new OutputEncoder(true);
    const first = enc.write(RAW);
    expect(first).toEqual({ data: RAW.toString('base64'), encoding: 'base64' });
    expect(enc.write(Buffer.from('text\n'))).toEqual({ data: 'text\n' });
    expect(enc.end()).toBeUndefined();
  });

  it('without binary, bad bytes become U+FFFD as TextDecoder does', () => {
    const outs = run(new OutputEncoder(false), [RAW.subarray(0, 3), RAW.subarray(3)]);
    expect(outs.every((o) => o === undefined || o.encoding === undefined)).toBe(true);
    expect(outs.map((o) => o?.data ?? '').join('')).toBe(new TextDecoder().decode(RAW));
  });
});

describe('parseNdjson', () => {
  const lines = [
    { stream: 'stdout', data: TEXT },
    { stream: 'stderr', data: '' },
    { stream: 'exit', exit_code: 3 },
  ];
  const body = Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

  it('yields the same values however the body is cut', async () => {
    for (const parts of splits(body)) {
      const got: unknown[] = [];
      for await (const v of parseNdjson(chunks(parts))) got.push(v);
      expect(got).toEqual(lines);
    }
  });

  it('keeps a last line without a newline and skips blank lines', async () => {
    const got: unknown[] = [];
    for await (const v of parseNdjson(chunks([Buffer.from('\n{"a":1}\n\n{"b":'), Buffer.from('2}')]))) got.push(v);
    expect(got).toEqual([{ a: 1 }, { b: 2 }]);
  });

  it('does not keep a view of a chunk the stream reuses', async () => {
    const reused = Buffer.from('{"a":');
    async function* body(): AsyncGenerator<Uint8Array> {
      yield reused;
      reused.fill(0x20); // the producer overwrites its buffer after handing it over
      yield Buffer.from('1}\n');
    }
    const got: unknown[] = [];
    for await (const v of parseNdjson(body())) got.push(v);
    expect(got).toEqual([{ a: 1 }]);
  });

  it('reports a malformed line as an internal error', async () => {
    const it = parseNdjson(chunks([Buffer.from('{"a":1}\nnot json\n')]));
    await expect(
      (async () => {
        for await (const _ of it) void _;
      })(),
    ).rejects.toMatchObject({ code: 'internal' });
  });
});

describe('ConsoleRing', () => {
  it('splits lines across chunks and multi-byte characters', () => {
    for (const parts of splits(BYTES)) {
      const ring = new ConsoleRing(10);
      for (const p of parts) ring.append(p);
      ring.flush();
      expect(ring.tail(10)).toEqual(TEXT.split('\n'));
    }
  });

  it('keeps the last lines only, oldest first', () => {
    const ring = new ConsoleRing(3);
    ring.append(Buffer.from('1\n2\n3\n4\n5\n'));
    expect(ring.tail(10)).toEqual(['3', '4', '5']);
    expect(ring.tail(2)).toEqual(['4', '5']);
  });

  it('keeps exactly the last lines of a large output, whatever the chunk sizes', () => {
    // Lines of every length, some longer than the 16 Ki characters a ring entry may hold.
    const lines = Array.from({ length: 6000 }, (_, i) => (i % 997 === 0 ? 'L'.repeat(40_000 + i) : `line ${i} ` + 'x'.repeat(i % 300)));
    const entries = lines.flatMap((l) => {
      const pieces: string[] = [];
      for (let at = 0; at < l.length || pieces.length === 0; at += 16 * 1024) pieces.push(l.slice(at, at + 16 * 1024));
      return pieces;
    });
    const bytes = Buffer.from(lines.join('\n') + '\n');
    for (const size of [1, 7, 4096, 65_536, 1 << 20]) {
      const ring = new ConsoleRing(1000);
      for (let at = 0; at < bytes.length; at += size) ring.append(bytes.subarray(at, at + size));
      ring.flush();
      expect(ring.tail(1000), `chunks of ${size}`).toEqual(entries.slice(-1000));
    }
  });

  it('keeps the order of lines from two sources as they arrived', () => {
    const ring = new ConsoleRing(100);
    for (let i = 0; i < 50; i++) {
      ring.append(Buffer.from(`out ${i}\n`), 'stdout');
      ring.append(Buffer.from(`err ${i}\n`), 'stderr');
    }
    ring.flush();
    expect(ring.tail(4)).toEqual(['out 48', 'err 48', 'out 49', 'err 49']);
    expect(ring.size).toBe(100);
  });
});
