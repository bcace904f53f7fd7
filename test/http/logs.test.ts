/** `GET /api/v1/sandboxes/{id}/logs`: the spec's array of lines, plus the sbx log cursor (`after`, `X-Log-Cursor`). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let id: string;
const logs = (query = '') => call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs${query}`);
const exec = (command: string) => call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command });

beforeAll(async () => {
  srv = await startTestServer();
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id;
});
afterAll(async () => srv?.close());

describe('console logs with a cursor', () => {
  it('a fresh sandbox: no lines, cursor 0', async () => {
    const res = await logs();
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
    expect(res.headers.get('x-log-cursor')).toBe('0');
  });

  it('the body stays an array of strings; the header numbers the last line', async () => {
    expect((await exec('echo ok; echo ok; echo; echo ok')).status).toBe(200);
    const res = await logs();
    expect(res.body).toEqual(['ok', 'ok', '', 'ok']);
    expect(res.headers.get('x-log-cursor')).toBe('4');
    const tail = await logs('?lines=1');
    expect(tail.body).toEqual(['ok']);
    expect(tail.headers.get('x-log-cursor')).toBe('4');
    const none = await logs('?lines=0');
    expect(none.body).toEqual([]);
    expect(none.headers.get('x-log-cursor')).toBe('4');
  });

  it('after=<cursor> returns only newer lines, oldest first, at most `lines`', async () => {
    expect((await logs('?after=4')).body).toEqual([]);
    expect((await logs('?after=4')).headers.get('x-log-cursor')).toBe('4');
    await exec('echo ok; echo two; echo ok');
    const next = await logs('?after=4');
    expect(next.body).toEqual(['ok', 'two', 'ok']);
    expect(next.headers.get('x-log-cursor')).toBe('7');
    const page = await logs('?after=2&lines=2');
    expect(page.body).toEqual(['', 'ok']);
    expect(page.headers.get('x-log-cursor')).toBe('4');
  });

  it('a cursor beyond the newest line (an earlier server run) starts over from the oldest line', async () => {
    const res = await logs('?after=1000000&lines=3');
    expect(res.body).toEqual(['ok', 'ok', '']);
    expect(res.headers.get('x-log-cursor')).toBe('3');
  });

  it('rejects a bad cursor with 400, and an unknown sandbox with 404', async () => {
    for (const q of ['?after=-1', '?after=x', '?after=1.5']) {
      const res = await logs(q);
      expect(res.status, q).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toContain('after');
    }
    const gone = await call(srv.url, 'GET', '/api/v1/sandboxes/sb-nope/logs?after=0');
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('not_found');
    expect(gone.headers.get('x-log-cursor')).toBeNull();
  });

  it('a browser may read the cursor header (CORS)', async () => {
    // A local page: with auth off the dev-box guard refuses other origins (DESIGN §3).
    const res = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs`, undefined, { origin: 'http://localhost:5173' });
    expect(res.headers.get('access-control-expose-headers')).toContain('X-Log-Cursor');
  });
});
