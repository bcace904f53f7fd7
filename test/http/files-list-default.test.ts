import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  srv = await startTestServer();
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id;
  expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/marker-for-list.txt', content: 'x' })).status).toBe(200);
});
afterAll(async () => srv?.close());

describe('GET /files/list path default (spec 4.2, 8)', () => {
  it('lists / for an absent or an empty path', async () => {
    const root = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/files/list?path=/`);
    expect(root.status).toBe(200);
    const names = root.body.map((f: { name: string }) => f.name);
    expect(names).toContain('marker-for-list.txt');
    for (const query of ['', '?path=']) {
      const res = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/files/list${query}`);
      expect(res.status, query).toBe(200);
      expect(
        res.body.map((f: { name: string }) => f.name),
        query,
      ).toEqual(names);
    }
  });

  it('still refuses a relative path', async () => {
    const res = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/files/list?path=etc`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('bad_request');
  });
});
