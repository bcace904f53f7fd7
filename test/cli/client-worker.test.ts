/** The typed client on the worker-facing routes (spec 4.6, 5.2), against a real server with worker credentials. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUD_CONTROL_PLANE } from '../../src/core/auth/worker-claims.js';
import { Client, SbxError } from '../../src/index.js';
import { mintWorkerToken } from '../../src/transports/shared/worker-auth.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const API_KEY = 'client-worker-suite-user-key-4b6d8f0a2c4e';
const ADMIN_KEY = 'client-worker-suite-admin-key-8f0a2c4e6b8d';
const SHARED = 'client-worker-shared-token-0c2e4b6d8f0a';
const SIGNING = 'client-worker-signing-key-6d8f0a2c4e6b8d0f';
const hb = {
  hostname: 'worker-host',
  providers: ['docker'],
  capabilities: ['spawn', 'exec'],
  capacity: { max_sandboxes: 4, rpc_url: 'http://10.0.0.7:7424/rpc' },
};

let srv: TestServer;
const clients: Client[] = [];
const client = (opts: ConstructorParameters<typeof Client>[0]) => {
  const c = new Client({ url: srv.url, ...opts });
  clients.push(c);
  return c;
};

beforeAll(async () => {
  srv = await startTestServer({
    auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY, worker_token: SHARED, worker_signing_key: SIGNING },
  });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await srv?.close();
});

describe('Client.worker (worker credentials)', () => {
  it('heartbeat with X-Worker-Token returns the updated worker, which users then see', async () => {
    const w = await client({ worker: { id: 'w-a', token: SHARED } }).worker.heartbeat(hb);
    expect(w).toMatchObject({ id: 'w-a', hostname: 'worker-host', status: 'online', providers: ['docker'], stale: false });
    expect(w.capacity).toMatchObject({ max_sandboxes: 4, rpc_url: 'http://10.0.0.7:7424/rpc' });
    expect((await client({ apiKey: API_KEY }).workers.get('w-a')).hostname).toBe('worker-host');
  });

  it('heartbeat with a signed token as Authorization: Bearer', async () => {
    const token = mintWorkerToken(SIGNING, { worker_id: 'w-b', aud: AUD_CONTROL_PLANE });
    expect((await client({ worker: { id: 'w-b', token, bearer: true } }).worker.heartbeat(hb)).id).toBe('w-b');
  });

  it('renews a lease the worker holds; 404 unknown, 409 foreign', async () => {
    const { store } = srv.plane.deps;
    const held = await store.acquireLease('sb-client-lease', 'w-a', 60_000, new Date());
    await store.acquireLease('sb-client-other', 'w-z', 60_000, new Date());
    const w = client({ worker: { id: 'w-a', token: SHARED } }).worker;
    const { lease } = await w.renewLease('sb-client-lease', '10m');
    expect(lease).toMatchObject({ resource_id: 'sb-client-lease', holder_id: 'w-a', generation: held!.generation + 1 });
    expect(Date.parse(lease.expires_at) - Date.now()).toBeGreaterThan(9 * 60_000);
    await expect(w.renewLease('sb-client-none', '1m')).rejects.toMatchObject({ code: 'not_found' });
    await expect(w.renewLease('sb-client-other', '1m')).rejects.toMatchObject({ code: 'conflict' });
    expect((await store.getLease('sb-client-other'))!.holder_id).toBe('w-z');
  });

  it('a wrong token is unauthorized, and the token appears in no error', async () => {
    const wrong = 'not-the-worker-token-2a4c6e8b0d';
    const err = await client({ worker: { id: 'w-a', token: wrong } })
      .worker.heartbeat(hb)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect(err).toMatchObject({ code: 'unauthorized' });
    expect(JSON.stringify({ m: (err as Error).message, d: (err as SbxError).details })).not.toContain(wrong);
  });
});

describe('credentials are never mixed in one request', () => {
  let capture: Server;
  let url: string;
  const seen: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
  beforeAll(async () => {
    capture = createServer((req, res) => {
      seen.push({ path: req.url ?? '', headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.url?.includes('/leases/') ? '{"lease":{}}' : req.url === '/api/v1/sandboxes' ? '[]' : '{}');
    });
    await new Promise<void>((resolve) => capture.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(capture.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise<void>((resolve) => capture.close(() => resolve())));

  it('worker routes get worker credentials only; other routes never get them', async () => {
    const both = new Client({
      url,
      apiKey: API_KEY,
      adminKey: ADMIN_KEY,
      userId: 'alice',
      headers: { 'X-Request-ID': 'req-1', 'X-API-Key': 'extra-key', Authorization: 'Bearer proxy-auth' },
      worker: { id: 'w-a', token: SHARED },
    });
    clients.push(both);
    await both.worker.heartbeat(hb);
    await both.worker.renewLease('sb-1', '1m');
    await both.list();
    const bearer = new Client({ url, worker: { id: 'w-b', token: 'signed-token', bearer: true } });
    clients.push(bearer);
    await bearer.worker.heartbeat(hb);

    const [beat, renew, list, signed] = seen;
    expect(beat!.path).toBe('/api/v1/worker/w-a/heartbeat');
    expect(renew!.path).toBe('/api/v1/worker/w-a/leases/sb-1/renew');
    for (const r of [beat!, renew!]) {
      expect(r.headers).toMatchObject({ 'x-worker-id': 'w-a', 'x-worker-token': SHARED, 'x-request-id': 'req-1' });
      for (const h of ['x-api-key', 'x-admin-api-key', 'x-user-id', 'authorization']) expect(r.headers[h], h).toBeUndefined();
    }
    expect(list!.headers).toMatchObject({
      'x-api-key': API_KEY,
      'x-admin-api-key': ADMIN_KEY,
      'x-user-id': 'alice',
      authorization: 'Bearer proxy-auth',
    });
    for (const h of ['x-worker-id', 'x-worker-token']) expect(list!.headers[h], h).toBeUndefined();
    expect(signed!.headers).toMatchObject({ 'x-worker-id': 'w-b', authorization: 'Bearer signed-token' });
    expect(signed!.headers['x-worker-token']).toBeUndefined();
  });

  it('without worker credentials: a clear error and no request at all', async () => {
    const before = seen.length;
    const userOnly = new Client({ url, apiKey: API_KEY, adminKey: ADMIN_KEY });
    clients.push(userOnly);
    await expect(userOnly.worker.heartbeat(hb)).rejects.toMatchObject({
      code: 'unauthorized',
      message: expect.stringContaining('worker credentials'),
    });
    await expect(userOnly.worker.renewLease('sb-1', '1m')).rejects.toMatchObject({ code: 'unauthorized' });
    expect(seen.length).toBe(before);
  });
});
