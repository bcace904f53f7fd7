import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUD_CONTROL_PLANE, AUD_RPC } from '../../src/core/auth/worker-claims.js';
import { mintWorkerToken } from '../../src/transports/shared/worker-auth.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const API_KEY = 'worker-suite-user-key-8a0c2e4b6d8f0a2c';
const SHARED = 'shared-worker-token-0c2e4b6d8f0a2c4e6b';
const W1_TOKEN = 'w1-own-token-2e4b6d8f0a2c4e6b8d0f';
const SIGNING = 'signing-key-active-4b6d8f0a2c4e6b8d0f2a';
const OLD_SIGNING = 'signing-key-previous-6d8f0a2c4e6b8d0f2a4c';

const hb = {
  hostname: 'worker-host',
  providers: ['docker'],
  capabilities: ['spawn', 'exec'],
  capacity: { max_sandboxes: 8, rpc_url: 'http://10.0.0.5:7424/rpc' },
};
const creds = (id: string, token: string) => ({ 'x-worker-id': id, 'x-worker-token': token });

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({
    auth: {
      enabled: true,
      api_key: API_KEY,
      worker_token: SHARED,
      worker_tokens: { w1: W1_TOKEN },
      worker_signing_key: SIGNING,
      worker_signing_keys: [OLD_SIGNING],
      worker_revoked_token_ids: ['revoked-jti'],
    },
  });
});
afterAll(async () => srv?.close());

describe('worker heartbeat (spec 4.6, 5.2)', () => {
  it('accepts the shared token and returns the updated worker', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', hb, creds('w2', SHARED));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: 'w2',
      hostname: 'worker-host',
      status: 'online',
      providers: ['docker'],
      capabilities: ['spawn', 'exec'],
      stale: false,
    });
    expect(res.body.capacity).toEqual({ max_sandboxes: 8, max_sandboxes_per_owner: 0, rpc_url: 'http://10.0.0.5:7424/rpc' });
    const seen = await call(srv.url, 'GET', '/api/v1/workers/w2', undefined, { 'x-api-key': API_KEY });
    expect(seen.body.hostname).toBe('worker-host');
  });

  it('per-worker token only for a worker with an entry', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/worker/w1/heartbeat', hb, creds('w1', W1_TOKEN))).status).toBe(200);
    const shared = await call(srv.url, 'POST', '/api/v1/worker/w1/heartbeat', hb, creds('w1', SHARED));
    expect(shared.status).toBe(401);
    expect(shared.body).toEqual({ code: 'unauthorized', message: 'invalid worker credentials' });
  });

  it('accepts signed tokens (active and rotation keys) via Authorization: Bearer', async () => {
    for (const key of [SIGNING, OLD_SIGNING]) {
      const token = mintWorkerToken(key, { worker_id: 'w3', aud: AUD_CONTROL_PLANE });
      const res = await call(srv.url, 'POST', '/api/v1/worker/w3/heartbeat', hb, { 'x-worker-id': 'w3', authorization: `Bearer ${token}` });
      expect(res.status).toBe(200);
    }
  });

  it('rejects a wrong audience, a revoked jti, an expired token and a foreign key with 401', async () => {
    const now = Math.floor(Date.now() / 1000);
    const bad = [
      mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_RPC }),
      mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_CONTROL_PLANE, jti: 'revoked-jti' }),
      mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_CONTROL_PLANE, iat: now - 600, exp: now - 300 }),
      mintWorkerToken('not-a-configured-key', { worker_id: 'w3', aud: AUD_CONTROL_PLANE }),
    ];
    for (const token of bad) {
      const res = await call(srv.url, 'POST', '/api/v1/worker/w3/heartbeat', hb, creds('w3', token));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('unauthorized');
      expect(res.text).not.toContain(token);
    }
  });

  it('403 when the authenticated worker is not the path worker', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/worker/w9/heartbeat', hb, creds('w2', SHARED));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('forbidden');
    const signed = mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_CONTROL_PLANE });
    expect((await call(srv.url, 'POST', '/api/v1/worker/w9/heartbeat', hb, creds('w3', signed))).status).toBe(403);
  });

  it('user and admin API keys never work on worker routes', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', hb, { 'x-api-key': API_KEY })).status).toBe(401);
    expect(
      (await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', hb, { 'x-worker-id': 'w2', 'x-worker-token': API_KEY })).status,
    ).toBe(401);
    expect(
      (await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', hb, { 'x-worker-id': 'w2', authorization: `Bearer ${API_KEY}` })).status,
    ).toBe(401);
  });

  it('validates the body after authentication', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', {}, creds('w2', SHARED))).status).toBe(400);
    expect((await call(srv.url, 'POST', '/api/v1/worker/w2/heartbeat', {}, {})).status).toBe(401);
  });
});

describe('worker registry reads (spec 2.9)', () => {
  it('never shows credentials carried in a worker rpc_url, wherever the worker is presented', async () => {
    const secretUrl = 'http://rpcuser:rpc-pass-9f8e7d@10.0.0.6:7424/rpc?token=abc-query-secret#frag-secret';
    const withCreds = { ...hb, capacity: { ...hb.capacity, rpc_url: secretUrl } };
    const beat = await call(srv.url, 'POST', '/api/v1/worker/w5/heartbeat', withCreds, creds('w5', SHARED));
    expect(beat.status).toBe(200);
    const user = { 'x-api-key': API_KEY };
    const listed = (await call(srv.url, 'GET', '/api/v1/workers', undefined, user)).body.find((w: { id: string }) => w.id === 'w5');
    const one = await call(srv.url, 'GET', '/api/v1/workers/w5', undefined, user);
    const diag = (await call(srv.url, 'GET', '/api/v1/diagnostics', undefined, user)).body.workers.items.find(
      (w: { id: string }) => w.id === 'w5',
    );
    for (const shown of [beat.body, listed, one.body, diag]) expect(shown.capacity.rpc_url).toBe('http://10.0.0.6:7424/rpc');
    for (const text of [beat.text, one.text, JSON.stringify(listed), JSON.stringify(diag)]) {
      for (const secret of ['rpcuser', 'rpc-pass-9f8e7d', 'abc-query-secret', 'frag-secret']) expect(text).not.toContain(secret);
    }
    // The registry keeps what the worker reported: the control plane calls that URL.
    expect((await srv.plane.deps.store.getWorker('w5'))!.capacity.rpc_url).toBe(secretUrl);

    // An rpc_url that is not an http(s) URL is refused, without echoing it; the registry keeps the last good one.
    const bad = await call(
      srv.url,
      'POST',
      '/api/v1/worker/w5/heartbeat',
      { ...hb, capacity: { rpc_url: 'not a url with pass-1234' } },
      creds('w5', SHARED),
    );
    expect(bad.status).toBe(400);
    expect(bad.text).not.toContain('pass-1234');
    expect((await call(srv.url, 'GET', '/api/v1/workers/w5', undefined, user)).body.capacity.rpc_url).toBe('http://10.0.0.6:7424/rpc');
  });
});

describe('worker lease renewal', () => {
  it('renews an unexpired lease the worker holds', async () => {
    const { store } = srv.plane.deps;
    const first = await store.acquireLease('sb-lease-1', 'w2', 60_000, new Date());
    expect(first).not.toBeNull();
    const res = await call(srv.url, 'POST', '/api/v1/worker/w2/leases/sb-lease-1/renew', { ttl: '10m' }, creds('w2', SHARED));
    expect(res.status).toBe(200);
    expect(res.body.lease).toMatchObject({ resource_id: 'sb-lease-1', holder_id: 'w2', generation: first!.generation + 1 });
    const left = Date.parse(res.body.lease.expires_at) - Date.now();
    expect(left).toBeGreaterThan(9 * 60_000);
    expect(left).toBeLessThanOrEqual(10 * 60_000);
  });

  it('404 for an unknown lease, 409 for a foreign or expired one, 400 for a bad ttl', async () => {
    const { store } = srv.plane.deps;
    await store.acquireLease('sb-lease-other', 'w1', 60_000, new Date());
    await store.acquireLease('sb-lease-old', 'w2', 1_000, new Date(Date.now() - 60_000));
    const renew = (res: string, ttl = '5m') => call(srv.url, 'POST', `/api/v1/worker/w2/leases/${res}/renew`, { ttl }, creds('w2', SHARED));
    expect((await renew('sb-no-lease')).status).toBe(404);
    const foreign = await renew('sb-lease-other');
    expect(foreign.status).toBe(409);
    expect(foreign.body.code).toBe('conflict');
    expect((await renew('sb-lease-old')).status).toBe(409);
    expect((await renew('sb-lease-other', 'soon')).status).toBe(400);
    expect((await renew('sb-lease-other', '0s')).status).toBe(400);
    expect((await store.getLease('sb-lease-other'))!.holder_id).toBe('w1');
  });

  it('a signed token whose scopes leave out worker:lease is 403', async () => {
    await srv.plane.deps.store.acquireLease('sb-lease-3', 'w3', 60_000, new Date());
    const hbOnly = mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_CONTROL_PLANE, scopes: ['worker:heartbeat', 'sandbox:admin'] });
    const res = await call(srv.url, 'POST', '/api/v1/worker/w3/leases/sb-lease-3/renew', { ttl: '1m' }, creds('w3', hbOnly));
    expect(res.status).toBe(403);
    const leaseScope = mintWorkerToken(SIGNING, { worker_id: 'w3', aud: AUD_CONTROL_PLANE, scopes: ['worker:lease'] });
    expect((await call(srv.url, 'POST', '/api/v1/worker/w3/leases/sb-lease-3/renew', { ttl: '1m' }, creds('w3', leaseScope))).status).toBe(
      200,
    );
  });
});
