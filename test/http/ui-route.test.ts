/**
 * The dashboard's server side (issue 19): /ui is open (static files, no data) with a strict CSP,
 * 404 when `server.ui` is false; browsers' WebSockets carry the key as a `sbx.key.<base64url>`
 * subprotocol, which the server never echoes and never accepts outside an upgrade.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KEY = 'ui-route-key-0123456789abcdef0123';
const b64 = (s: string) => Buffer.from(s).toString('base64url');

/** Opens a WebSocket with these subprotocols; resolves with the chosen one or the refusal status. */
function open(url: string, protocols: string[]): Promise<{ protocol?: string; status?: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.on('open', () => {
      resolve({ protocol: ws.protocol });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode });
      res.resume();
      ws.terminate();
    });
    ws.on('error', reject);
  });
}

describe('dashboard route and WebSocket key subprotocol', () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    // dist/ui is built from the sources under test once per run (test/helpers/build-setup.ts).
    srv = await startTestServer({ auth: { api_key: KEY } });
    const r = await fetch(`${srv.url}/api/v1/sandboxes`, { method: 'POST', headers: { 'x-api-key': KEY } });
    id = ((await r.json()) as { id: string }).id;
  }, 60_000);
  afterAll(async () => srv?.close());

  it('serves /ui without a key, with CSP, nosniff and content types', async () => {
    for (const [path, type] of [
      ['/ui', 'text/html'],
      ['/ui/', 'text/html'],
      ['/ui/app.js', 'text/javascript'],
      ['/ui/app.css', 'text/css'],
    ] as const) {
      const r = await fetch(`${srv.url}${path}`);
      await r.arrayBuffer();
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toContain(type);
      expect(r.headers.get('content-security-policy')).toMatch(/default-src 'none'.*script-src 'self'/);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const missing = await fetch(`${srv.url}/ui/../../package.json`);
    await missing.arrayBuffer();
    expect(missing.status).toBe(404);
  });

  it('accepts the key as a subprotocol on upgrades only, selecting sbx.v1', async () => {
    const url = `${srv.url.replace(/^http/, 'ws')}/api/v1/sandboxes/${id}/exec/ws`;
    expect(await open(url, ['sbx.v1', `sbx.key.${b64(KEY)}`])).toEqual({ protocol: 'sbx.v1' });
    expect(await open(url, ['sbx.v1', `sbx.key.${b64('wrong-key')}`])).toEqual({ status: 401 });
    expect(await open(url, ['sbx.v1'])).toEqual({ status: 401 });
    // Not an upgrade: the header means nothing.
    const plain = await fetch(`${srv.url}/api/v1/sandboxes`, { headers: { 'sec-websocket-protocol': `sbx.v1, sbx.key.${b64(KEY)}` } });
    await plain.arrayBuffer();
    expect(plain.status).toBe(401);
  });
});
