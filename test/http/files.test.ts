import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/http.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  srv = await startTestServer({ defaults: { max_file_mb: 1 } });
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
});
afterAll(async () => srv?.close());

const f = (method: string, suffix: string, body?: unknown) => call(srv.url, method, `/api/v1/sandboxes/${id}/files${suffix}`, body);

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

    expect((await f('POST', '/move', { old_path: '/workspace/g/two.txt', new_path: '/workspace/g/moved.txt' })).body).toEqual({ status: 'moved' });
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

  it('publishes file.written and file.read events', async () => {
    await f('POST', '', { path: '/workspace/ev.txt', content: 'e' });
    await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=/workspace/ev.txt`);
    const kinds = srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type);
    expect(kinds).toContain('file.written');
    expect(kinds).toContain('file.read');
  });
});
