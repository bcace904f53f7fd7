import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/http.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  // Body limit above the file limit, so both 413s can be told apart.
  srv = await startTestServer({ defaults: { max_file_mb: 1 }, server: { body_limit_mb: 2 } });
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
});
afterAll(async () => srv?.close());

const f = (method: string, suffix: string, body?: unknown) => call(srv.url, method, `/api/v1/sandboxes/${id}/files${suffix}`, body);
/** POST of raw bytes as application/octet-stream; status and the parsed JSON answer. */
async function postBytes(path: string, bytes: Uint8Array): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(srv.url + path, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}
/** A raw write; `query` is the query string without `?`. */
const raw = (query: string, bytes: Uint8Array, sandbox = id, suffix = '') =>
  postBytes(`/api/v1/sandboxes/${sandbox}/files${suffix}${query ? `?${query}` : ''}`, bytes);
const readBack = async (path: string) =>
  Buffer.from(await (await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`)).arrayBuffer());

describe('files (spec 4.2)', () => {
  it('writes and reads text, creating parents, with mode', async () => {
    const w = await f('POST', '', { path: '/workspace/a/b/hello.txt', content: 'hi there\n', mode: '640' });
    expect(w.status).toBe(200);
    expect(w.body).toEqual({ status: 'written' });
    const r = await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=/workspace/a/b/hello.txt`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(await r.text()).toBe('hi there\n');
    const st = await f('GET', '/stat?path=/workspace/a/b/hello.txt');
    expect(st.body).toMatchObject({ name: 'hello.txt', path: '/workspace/a/b/hello.txt', size: 9, is_dir: false, mode: '0640' });
    expect(Date.parse(st.body.mod_time)).not.toBeNaN();
  });

  it('is binary safe both ways (base64 write, raw read)', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await f('POST', '', { path: '/workspace/bin.dat', content: bytes.toString('base64'), encoding: 'base64' });
    const r = await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=/workspace/bin.dat`);
    expect(Buffer.from(await r.arrayBuffer()).equals(bytes)).toBe(true);
    expect((await f('POST', '', { path: '/workspace/x', content: '!!!', encoding: 'base64' })).status).toBe(400);
    // Line-wrapped base64 is accepted; padding only at the end, at most two.
    const wrapped = bytes.toString('base64').replace(/.{76}/g, '$&\r\n');
    expect((await f('POST', '', { path: '/workspace/wrapped.dat', content: wrapped, encoding: 'base64' })).status).toBe(200);
    expect(
      Buffer.from(await (await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=/workspace/wrapped.dat`)).arrayBuffer()).equals(bytes),
    ).toBe(true);
    for (const bad of ['QQ=A', 'QQ===', '=QQQ', 'QUJD-_', 'Q']) {
      const res = await f('POST', '', { path: '/workspace/x', content: bad, encoding: 'base64' });
      expect(res.status, bad).toBe(400);
      expect(res.body).toEqual({ code: 'bad_request', message: 'content is not valid base64' });
    }
  });

  it('lists (default /), moves, chmods, globs, deletes', async () => {
    await f('POST', '', { path: '/workspace/g/one.txt', content: '1' });
    await f('POST', '', { path: '/workspace/g/two.txt', content: '2' });
    await f('POST', '', { path: '/workspace/g/deep/three.txt', content: '3' });
    const root = await f('GET', '/list');
    expect(root.status).toBe(200);
    expect(root.body.map((i: { name: string }) => i.name)).toContain('workspace');
    const ls = await f('GET', '/list?path=/workspace/g');
    expect(ls.body.map((i: { name: string }) => i.name)).toEqual(['deep', 'one.txt', 'two.txt']);
    expect(ls.body[0]).toMatchObject({ is_dir: true, path: '/workspace/g/deep' });

    expect((await f('POST', '/move', { old_path: '/workspace/g/two.txt', new_path: '/workspace/g/moved.txt' })).body).toEqual({
      status: 'moved',
    });
    expect((await f('POST', '/chmod', { path: '/workspace/g/moved.txt', mode: '755' })).body).toEqual({ status: 'chmod applied' });
    expect((await f('GET', '/stat?path=/workspace/g/moved.txt')).body.mode).toBe('0755');

    expect((await f('GET', '/glob?pattern=/workspace/g/*.txt')).body).toEqual(['/workspace/g/moved.txt', '/workspace/g/one.txt']);
    expect((await f('GET', '/glob?pattern=/workspace/g/**/*.txt')).body).toContain('/workspace/g/deep/three.txt');

    expect((await f('DELETE', '?path=/workspace/g/one.txt')).body).toEqual({ status: 'deleted' });
    const nonEmpty = await f('DELETE', '?path=/workspace/g');
    expect(nonEmpty.status).toBe(400);
    expect((await f('DELETE', '?path=/workspace/g&recursive=true')).body).toEqual({ status: 'deleted' });
    expect((await f('GET', '/stat?path=/workspace/g')).status).toBe(404);
  });

  it('rejects relative, NUL, escaping paths and bad modes', async () => {
    const bad: Array<[string, string, unknown?]> = [
      ['POST', '', { path: 'relative.txt', content: 'x' }],
      ['POST', '', { path: '/workspace/a\u0000b', content: 'x' }],
      ['POST', '', { path: '/../../etc/passwd', content: 'x' }],
      ['GET', '?path=/../etc/shadow'],
      ['GET', '/stat?path=relative'],
      ['POST', '', { path: '/workspace/m', content: 'x', mode: '999' }],
      ['POST', '/chmod', { path: '/workspace/m', mode: 'rwx' }],
      ['GET', '/glob?pattern=/workspace/../*'],
      ['GET', '?'],
    ];
    for (const [m, s, b] of bad) {
      const res = await f(m, s, b);
      expect(res.status, `${m} ${s} ${JSON.stringify(b)}`).toBe(400);
      expect(res.body.code).toBe('bad_request');
    }
  });

  it('answers missing paths with 404 and oversized files with 413', async () => {
    for (const s of ['?path=/nope', '/stat?path=/nope', '/list?path=/nope']) {
      const res = await f('GET', s);
      expect(res.status, s).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect((await f('DELETE', '?path=/nope')).status).toBe(404);
    expect((await f('POST', '/move', { old_path: '/nope', new_path: '/workspace/z' })).status).toBe(404);
    const big = Buffer.alloc(1024 * 1024 + 10, 1).toString('base64');
    const res = await f('POST', '', { path: '/workspace/big', content: big, encoding: 'base64' });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
  });

  describe('raw application/octet-stream writes (sbx extension)', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

    it('writes every byte value exactly, read back through GET', async () => {
      const w = await raw('path=/workspace/raw/all.bin', all);
      expect(w.status).toBe(200);
      expect(w.headers.get('content-type')).toMatch(/^application\/json/);
      expect(w.body).toEqual({ status: 'written' });
      const back = await readBack('/workspace/raw/all.bin');
      expect(back.length).toBe(256);
      expect(back.equals(all)).toBe(true);
      const st = await f('GET', '/stat?path=/workspace/raw/all.bin');
      expect(st.body).toMatchObject({ name: 'all.bin', size: 256, is_dir: false, mode: '0644' });
      // Overwrite with different bytes; the path is normalized like the JSON form's.
      const rev = Buffer.from(all).reverse();
      expect((await raw('path=/workspace/raw/./x/../all.bin', rev)).status).toBe(200);
      expect((await readBack('/workspace/raw/all.bin')).equals(rev)).toBe(true);
    });

    it('writes an empty body as an empty file', async () => {
      expect((await raw('path=/workspace/raw/empty', new Uint8Array(0))).body).toEqual({ status: 'written' });
      expect((await f('GET', '/stat?path=/workspace/raw/empty')).body).toMatchObject({ size: 0, is_dir: false });
      expect((await readBack('/workspace/raw/empty')).length).toBe(0);
    });

    it('applies mode from the query string', async () => {
      expect((await raw('path=/workspace/raw/run.sh&mode=0755', Buffer.from('#!/bin/sh\n'))).status).toBe(200);
      expect((await f('GET', '/stat?path=/workspace/raw/run.sh')).body).toMatchObject({ mode: '0755', size: 10 });
      expect((await raw('path=/workspace/raw/secret&mode=600', Buffer.from('s'))).status).toBe(200);
      expect((await f('GET', '/stat?path=/workspace/raw/secret')).body.mode).toBe('0600');
      // An overwrite without a mode keeps the file's mode, as with the JSON form.
      expect((await raw('path=/workspace/raw/run.sh', Buffer.from('#!/bin/sh\nexit 0\n'))).status).toBe(200);
      expect((await f('GET', '/stat?path=/workspace/raw/run.sh')).body).toMatchObject({ mode: '0755', size: 17 });
    });

    it('refuses a missing or relative path, NUL, escapes and bad modes with 400', async () => {
      const cases: Array<[string, RegExp]> = [
        ['', /path is required/],
        ['mode=0644', /path is required/],
        ['path=', /path/],
        ['path=relative.txt', /path must be absolute/],
        ['path=workspace/x', /path must be absolute/],
        ['path=/workspace/a%00b', /NUL/],
        ['path=/../../etc/passwd', /escapes the sandbox root/],
        ['path=/workspace/m&mode=999', /mode/],
        ['path=/workspace/m&mode=rwx', /mode/],
        ['path=/workspace/m&mode=', /mode/],
      ];
      for (const [query, message] of cases) {
        const res = await raw(query, Buffer.from('x'));
        expect(res.status, query).toBe(400);
        expect(res.body.code, query).toBe('bad_request');
        expect(res.body.message, query).toMatch(message);
      }
      expect((await f('GET', '/stat?path=/workspace/m')).status).toBe(404);
    });

    it('answers 413 over the body limit and over the file limit', async () => {
      // server.body_limit_mb = 2: refused by the parser before anything is written.
      const overBody = await raw('path=/workspace/raw/huge', Buffer.alloc(2 * 1024 * 1024 + 1, 7));
      expect(overBody.status).toBe(413);
      expect(overBody.body).toEqual({ code: 'payload_too_large', message: 'request body is larger than the server accepts' });
      // defaults.max_file_mb = 1: within the body limit, refused by the file limit.
      const overFile = await raw('path=/workspace/raw/huge', Buffer.alloc(1024 * 1024 + 1, 7));
      expect(overFile.status).toBe(413);
      expect(overFile.body.code).toBe('payload_too_large');
      expect(overFile.body.message).toBe(`file content is ${1024 * 1024 + 1} bytes; the limit is ${1024 * 1024}`);
      expect((await f('GET', '/stat?path=/workspace/raw/huge')).status).toBe(404);
      // Exactly at the file limit is fine.
      const atLimit = Buffer.alloc(1024 * 1024, 9);
      expect((await raw('path=/workspace/raw/huge', atLimit)).status).toBe(200);
      expect((await readBack('/workspace/raw/huge')).equals(atLimit)).toBe(true);
    });

    it('answers 404 for an unknown sandbox', async () => {
      const res = await raw('path=/workspace/x', Buffer.from('x'), 'sbx-does-not-exist');
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    });

    it('keeps octet-stream unsupported elsewhere, and other body types on the JSON check', async () => {
      const move = await raw('', Buffer.from('{}'), id, '/move');
      expect(move.status).toBe(400);
      expect(move.body.code).toBe('bad_request');
      expect(move.body.message).toMatch(/^unsupported content type/);
      const unknown = await postBytes('/api/v1/nope', Buffer.from('x'));
      expect(unknown.status).toBe(404);
      // No body, or text/plain: validated as the JSON form, as before the extension.
      const empty = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files?path=/workspace/x`);
      expect(empty.status).toBe(400);
      expect(empty.body.message).toMatch(/^invalid body: .*path/);
      const text = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files?path=/workspace/x`, 'hello', {
        'content-type': 'text/plain',
      });
      expect(text.status).toBe(400);
      expect(text.body).toEqual({ code: 'bad_request', message: 'invalid body: must be object' });
      // A JSON body ignores the raw form's query path.
      expect((await f('POST', '?path=/workspace/ignored', { path: '/workspace/json.txt', content: 'j' })).status).toBe(200);
      expect((await readBack('/workspace/json.txt')).toString()).toBe('j');
      expect((await f('GET', '/stat?path=/workspace/ignored')).status).toBe(404);
    });

    it('publishes file.written with the byte size', async () => {
      await raw('path=/workspace/raw/ev.bin', all);
      const ev = srv.plane.deps.bus
        .recent({ sandbox_id: id })
        .filter((e) => e.type === 'file.written' && e.data?.path === '/workspace/raw/ev.bin');
      expect(ev.map((e) => e.data)).toEqual([{ path: '/workspace/raw/ev.bin', size: 256 }]);
    });
  });

  it('publishes file.written and file.read events', async () => {
    await f('POST', '', { path: '/workspace/ev.txt', content: 'e' });
    await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=/workspace/ev.txt`);
    const kinds = srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type);
    expect(kinds).toContain('file.written');
    expect(kinds).toContain('file.read');
  });
});
