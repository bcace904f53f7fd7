import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileWriteScanner } from '../../src/transports/http/file-write-body.js';
import { Base64Stream, type ByteSink, decodeChunks, rawText, tee, Utf8Stream } from '../../src/transports/http/upload-decoders.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  // Body limit above the file limit, so both 413s can be told apart.
  srv = await startTestServer({ defaults: { max_file_mb: 1 }, server: { body_limit_mb: 3 } });
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
});
afterAll(async () => srv?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const readBack = async (path: string) => {
  const res = await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`);
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
};

/**
 * A POST of `body` over a raw socket, written in the given pieces with a pause between them, so the
 * server receives them as separate chunks. `cut` closes the socket before the last piece.
 */
function rawPost(path: string, pieces: Buffer[], opts: { cut?: boolean } = {}): Promise<{ status: number; body: any } | null> {
  const { port, hostname } = new URL(srv.url);
  const total = pieces.reduce((n, p) => n + p.length, 0);
  return new Promise((resolve, reject) => {
    const sock = connect({ port: Number(port), host: hostname }, async () => {
      sock.setNoDelay(true);
      sock.write(
        `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ` +
          `${total}\r\nConnection: close\r\n\r\n`,
      );
      const send = opts.cut ? pieces.slice(0, -1) : pieces;
      for (const p of send) {
        await sleep(15);
        sock.write(p);
      }
      if (opts.cut) {
        await sleep(50);
        sock.destroy();
        resolve(null);
      }
    });
    let data = '';
    sock.on('data', (d) => (data += d.toString('utf8')));
    sock.on('error', (e) => (opts.cut ? undefined : reject(e)));
    sock.on('close', () => {
      if (opts.cut) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]);
      const text = data.slice(data.indexOf('\r\n\r\n') + 4);
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON
      }
      resolve({ status, body });
    });
  });
}

/** `text` cut at the given offsets. */
function split(text: string | Buffer, at: number[]): Buffer[] {
  const b = Buffer.isBuffer(text) ? text : Buffer.from(text, 'utf8');
  const out: Buffer[] = [];
  let prev = 0;
  // In order and within the text: the pieces always add up to it exactly.
  for (const a of [...new Set(at)]
    .filter((x) => x > 0 && x < b.length)
    .sort((x, y) => x - y)
    .concat(b.length)) {
    out.push(b.subarray(prev, a));
    prev = a;
  }
  return out.filter((p) => p.length > 0);
}

/** The scanner's result for `body` fed in the given pieces: the fields and the file's bytes. */
/**
 * The content of a body scanned in `pieces`, both ways an upload takes it (file-upload.ts): the
 * raw text decoded once the body is complete (the spool's way), and — when the encoding was known
 * when the content began, or guessed right — decoded as it streamed (the direct way).
 */
async function scan(pieces: Buffer[]): Promise<{ fields: Record<string, unknown> | undefined; bytes: Buffer; direct?: Buffer }> {
  const raw: Buffer[] = [];
  const direct: Buffer[] = [];
  let stage: Base64Stream | Utf8Stream | undefined;
  let before: unknown;
  const s = new FileWriteScanner((f) => {
    before = f.encoding;
    const out: ByteSink = { write: (b) => direct.push(Buffer.from(b)) };
    stage = before === 'utf8' ? new Utf8Stream(out) : new Base64Stream(out, before === undefined);
    return rawText(tee({ write: (b) => raw.push(Buffer.from(b)) }, stage));
  });
  for (const p of pieces) s.write(p);
  const fields = s.end();
  const chunks: Uint8Array[] = [];
  for await (const c of decodeChunks(
    (async function* () {
      yield* raw;
    })(),
    fields?.encoding,
  ))
    chunks.push(c);
  const bytes = Buffer.concat(chunks);
  const guessed = before === undefined && fields?.encoding === 'base64' && !(stage as Base64Stream).failed;
  if (stage && (before !== undefined || guessed)) {
    stage.end();
    return { fields, bytes, direct: Buffer.concat(direct) };
  }
  return { fields, bytes };
}
/** What the old whole-body parser made of `content`: JSON.parse, then decodeText's rules. */
function expectedBytes(parsed: Record<string, unknown>): Buffer {
  const content = parsed.content as string;
  return parsed.encoding === 'base64' ? Buffer.from(content.replace(/\s+/g, ''), 'base64') : Buffer.from(content, 'utf8');
}

const FILES = () => `/api/v1/sandboxes/${id}/files`;

describe('streamed JSON file writes (issue 12.5)', () => {
  it('a base64 upload split inside base64 quads and inside escapes is decoded exactly', async () => {
    const data = randomBytes(300_001);
    const b64 = data.toString('base64');
    // JSON encoders may escape "/" as "\/": that too is base64 text after unescaping.
    const escaped = b64.replace(/\//g, '\\/');
    const body = `{"path":"/workspace/bin.dat","content":"${escaped}","encoding":"base64","mode":"600"}`;
    const start = body.indexOf('"content":"') + 11;
    const slash = body.indexOf('\\/', start);
    const pieces = split(body, [start + 1, start + 2, start + 7, slash + 1, start + 100_003, start + 200_002, body.length - 5]);
    expect(Buffer.concat(pieces).equals(Buffer.from(body))).toBe(true);
    const res = await rawPost(FILES(), pieces);
    expect(res).toEqual({ status: 200, body: { status: 'written' } });
    const back = await readBack('/workspace/bin.dat');
    expect(back.status).toBe(200);
    expect(back.bytes.equals(data)).toBe(true);
    expect((await call(srv.url, 'GET', `${FILES()}/stat?path=/workspace/bin.dat`)).body.mode).toBe('0600');
  });

  it('utf8 content with JSON escapes, surrogate pairs and multi-byte characters split across chunks', async () => {
    const content = 'line1\n"quoted" back\\slash /slash tab\t é 😀 \u0001 end\u2028';
    const body = JSON.stringify({ path: '/workspace/t.txt', content }).replace('é', '\\u00e9').replace('😀', '\\ud83d\\ude00');
    expect(JSON.parse(body).content).toBe(content);
    // Every boundary: inside \uXXXX, between the halves of a surrogate pair, inside raw UTF-8.
    const raw = Buffer.from(body.replace('\\u00e9', 'é'), 'utf8');
    for (const [label, bytes] of [
      ['escaped', Buffer.from(body)],
      ['raw utf8', raw],
    ] as const) {
      const cuts = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1).filter((i) => i % 3 === 0);
      const res = await rawPost(FILES(), split(bytes, cuts.slice(0, 40)).concat([]));
      expect(res?.status, label).toBe(200);
      expect((await readBack('/workspace/t.txt')).bytes.toString('utf8'), label).toBe(content);
    }
  });

  it('matches JSON.parse at every split point, encoding before or after content, wrapped base64 too', async () => {
    const bodies = [
      JSON.stringify({ path: '/p', content: 'a"b\\c/d\né😀\ud800x', mode: '644' }),
      // Text that looks like base64 until it does not, with encoding last (the decoder guesses, then backs out).
      JSON.stringify({ path: '/p', content: 'QUJDREVG+/9aaa=b' }),
      JSON.stringify({ path: '/p', content: 'QUJDREVG==', encoding: 'utf8' }),
      JSON.stringify({ path: '/p', content: 'QUJDRA' }),
      JSON.stringify({ path: '/p', content: 'QUJDRA', encoding: 'base64' }),
      JSON.stringify({ path: '/p', content: 'QUJDREVG+/9a', encoding: 'base64' }),
      JSON.stringify({ path: '/p', content: 'QUJDRA==', encoding: 'base64' }),
      JSON.stringify({ encoding: 'base64', content: 'aGVsbG8gd29ybGQ=\n', path: '/p' }),
      JSON.stringify({ encoding: 'base64', content: 'QUJ\\/RA=', path: '/p' }).replace('\\\\/', '\\/'),
      `{ "path" : "/p" , "content" : "aGVs\\nbG8g\\r\\nd29y bGQ=" , "encoding" : "base64" , "x": [1, {"y": "}"}], "n": 12.5e1, "t": true }`,
    ];
    for (const body of bodies) {
      const expected = JSON.parse(body) as Record<string, unknown>;
      const want = expectedBytes(expected);
      const b = Buffer.from(body, 'utf8');
      for (let cut = 1; cut < b.length; cut++) {
        const { fields, bytes, direct } = await scan([b.subarray(0, cut), b.subarray(cut)]);
        const { content: _content, ...rest } = expected;
        expect(fields).toEqual({ ...rest, content: '' });
        expect(bytes.equals(want), `${body} cut at ${cut}`).toBe(true);
        if (direct) expect(direct.equals(want), `${body} cut at ${cut}, streamed`).toBe(true);
      }
      // One byte at a time.
      const bytewise = await scan([...b].map((x) => Buffer.from([x])));
      expect(bytewise.bytes.equals(want), body).toBe(true);
      if (bytewise.direct) expect(bytewise.direct.equals(want), body).toBe(true);
    }
    const decoded = async (text: string) => {
      const out: Uint8Array[] = [];
      for await (const c of decodeChunks(
        (async function* () {
          yield Buffer.from(text);
        })(),
        'base64',
      ))
        out.push(c);
      return Buffer.concat(out).toString();
    };
    expect(await decoded('aGVs\nbG8g\r\nd29y bGQ=')).toBe('hello world');
    expect(await decoded('aGk')).toBe('hi');
  });

  it('over-size uploads are 413 payload_too_large (file limit and body limit)', async () => {
    const overFile = await call(srv.url, 'POST', FILES(), {
      path: '/workspace/big',
      content: randomBytes(1024 * 1024 + 1).toString('base64'),
      encoding: 'base64',
    });
    expect(overFile.status).toBe(413);
    expect(overFile.body.code).toBe('payload_too_large');
    const overBody = await call(srv.url, 'POST', FILES(), { path: '/workspace/big', content: 'x'.repeat(3 * 1024 * 1024 + 10) });
    expect(overBody.status).toBe(413);
    expect(Object.keys(overBody.body).sort()).toEqual(['code', 'message']);
    expect((await readBack('/workspace/big')).status).toBe(404);
  });

  it('malformed bodies are 400 bad_request {code, message}, writing nothing', async () => {
    const cases = [
      '{"path":"/workspace/m","content":"abc',
      '{"path":"/workspace/m","content":"a\\qb"}',
      '{"path":"/workspace/m","content":"a\\u12G4"}',
      '{"path":"/workspace/m","content":"not base64!","encoding":"base64"}',
      '{"path":"/workspace/m","content":"QUJD=QUJD","encoding":"base64"}',
      '{"path":"/workspace/m","content":"QUJDR","encoding":"base64"}',
      '{"path":"/workspace/m","content":42}',
      '{"path":"/workspace/m","content":"a","content":"b"}',
      '{"path":"/workspace/m","content":"a"} trailing',
      '{"path":"/workspace/m","content":"a","extra":1}',
      '{"path":"/workspace/m","content":"a","encoding":"utf16"}',
      '{"path":"/workspace/m" "content":"a"}',
      '{"content":"a"}',
      '["/workspace/m","a"]',
      `{"path":"/workspace/m","content":"a${'\u0001'}b"}`,
    ];
    for (const body of cases) {
      const res = await call(srv.url, 'POST', FILES(), body);
      expect(res.status, body).toBe(400);
      expect(res.body.code, body).toBe('bad_request');
      expect(Object.keys(res.body).sort(), body).toEqual(['code', 'message']);
    }
    expect((await readBack('/workspace/m')).status).toBe(404);
    // An empty body is a body without path: 400 from the schema, as before.
    expect((await call(srv.url, 'POST', FILES(), '')).status).toBe(400);
  });

  it('a connection cut mid-upload leaves the old file as it was', async () => {
    expect((await call(srv.url, 'POST', FILES(), { path: '/workspace/keep.txt', content: 'old content' })).status).toBe(200);
    const body = JSON.stringify({ path: '/workspace/keep.txt', content: randomBytes(200_000).toString('base64'), encoding: 'base64' });
    expect(await rawPost(FILES(), split(body, [1000, 50_000, 100_000]), { cut: true })).toBeNull();
    const fresh = JSON.stringify({ path: '/workspace/new.txt', content: 'x'.repeat(100_000) });
    expect(await rawPost(FILES(), split(fresh, [10, 50_000]), { cut: true })).toBeNull();
    // The server is done with both cut requests once it gave their bytes back.
    await waitFor('the cut uploads released', () => srv.plane.deps.inflight!.inflight === 0);
    const back = await readBack('/workspace/keep.txt');
    expect(back.bytes.toString()).toBe('old content');
    expect((await readBack('/workspace/new.txt')).status).toBe(404);
    // The server still answers normally afterwards.
    expect((await call(srv.url, 'POST', FILES(), { path: '/workspace/keep.txt', content: 'new' })).status).toBe(200);
    expect((await readBack('/workspace/keep.txt')).bytes.toString()).toBe('new');
  });
});
