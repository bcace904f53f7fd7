import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { secretValues } from '../../src/config/index.js';
import { createLogger } from '../../src/log/logger.js';
import { call, type Res } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openSse, type SseStream } from '../helpers/sse.js';

/** Every secret the configuration supports, each recognisable anywhere it might leak. */
const S = {
  api: 'sbx-test-api-key-5f1c9a7e2b4d4c0e8a11',
  admin: 'sbx-test-admin-key-9d3e6b2a7c1f4e8d0b22',
  worker: 'sbx-test-worker-token-3a8f5c1e9b7d2f6a0c33',
  workerA: 'sbx-test-worker-a-token-7e2d4b9f1a3c8e5d0f44',
  signing: 'sbx-test-signing-key-1b6f3d8a5e2c9f7b0d55',
  signingOld: 'sbx-test-signing-old-4c9e1a7d3f5b8e2a0c66',
  hosted: 'sbx-test-hosted-key-8a2c5e9f1d7b3a6e0f77',
  custom: 'sbx-test-custom-token-6d1f8b3e9a5c2d7f0a88',
  registry: 'sbx-test-registry-pass-2e7a9c4f6b1d8e3a0b99',
  dbPassword: 'sbx-test-db-pass-5c3f7a1e9d2b6f8c0d10',
  envValue: 'sbx-test-env-secret-9f4b2d7e1c6a3f8e0e21',
};

let srv: TestServer;
let url: string;
let logs = '';
let configured: string[] = [];
const errorBodies: Array<{ what: string; res: Res }> = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs += chunk.toString();
      cb();
    },
  });
  srv = await startTestServer(
    {
      database: { dsn: `postgres://sbx:${S.dbPassword}@db.internal:5432/sbx` },
      providers: {
        docker: { registry_auth: { username: 'ci', password: S.registry } },
        hosted: { base_url: 'https://hosted.invalid', api_key: S.hosted },
        custom_http: { base_url: 'https://custom.invalid', api_key: S.custom },
      },
      auth: {
        enabled: true,
        api_key: S.api,
        admin_api_key: S.admin,
        worker_token: S.worker,
        worker_tokens: { 'worker-a': S.workerA },
        worker_signing_key: S.signing,
        worker_signing_keys: [S.signingOld],
      },
      defaults: { max_exec_timeout: '10m' },
      logging: { level: 'debug', format: 'json' },
    },
    (config) => {
      configured = secretValues(config);
      // The logger createControlPlane would build, writing into a buffer instead of stderr.
      return { logger: createLogger({ level: 'debug', format: 'json', secrets: configured, destination: sink }) };
    },
  );
  url = srv.url;
});

afterAll(async () => srv?.close());

const user = { 'X-API-Key': S.api };
const admin = { 'X-Admin-API-Key': S.admin };

describe('no secret reaches diagnostics, metrics, events, logs or error bodies', () => {
  it('sweeps every output after exercising the API with every credential', async () => {
    // The config loader found every secret we set (so the sweep below checks them all).
    for (const v of Object.values(S).filter((v) => v !== S.envValue)) expect(configured).toContain(v);

    const events: SseStream = await openSse(`${url}/api/v1/events`, user);
    expect(events.status).toBe(200);

    const id = (await call(url, 'POST', '/api/v1/sandboxes', { metadata: { purpose: 'redaction' } }, user)).body.id as string;
    expect(id).toMatch(/^sb-/);
    const ex = await call(
      url,
      'POST',
      `/api/v1/sandboxes/${id}/exec`,
      { command: 'test -n "$TOKEN" && echo set', env: { TOKEN: S.envValue } },
      user,
    );
    expect(ex.body.stdout).toBe('set\n');
    // A shell assignment in front of the command is an env value too, not a program name.
    const ex2 = await call(url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: `TOKEN=${S.envValue} true` }, user);
    expect(ex2.status).toBe(200);
    const slow = await call(
      url,
      'POST',
      `/api/v1/sandboxes/${id}/exec`,
      { command: 'sleep 5', timeout: '1s', env: { TOKEN: S.envValue } },
      user,
    );
    expect(slow.status).toBe(408);
    errorBodies.push({ what: 'exec timeout', res: slow });
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/cfg', content: 'plain' }, user);

    // Failures with and without credentials, right and wrong.
    errorBodies.push({ what: 'no key', res: await call(url, 'GET', '/api/v1/sandboxes') });
    errorBodies.push({ what: 'wrong key', res: await call(url, 'GET', '/api/v1/sandboxes', undefined, { 'X-API-Key': `${S.api}-wrong` }) });
    errorBodies.push({ what: 'user key on admin', res: await call(url, 'GET', '/api/v1/admin/diagnostics', undefined, user) });
    errorBodies.push({
      what: 'wrong admin key',
      res: await call(url, 'GET', '/api/v1/admin/diagnostics', undefined, { 'X-Admin-API-Key': S.worker }),
    });
    errorBodies.push({
      what: 'api key on worker route',
      res: await call(url, 'POST', '/api/v1/worker/worker-a/heartbeat', { hostname: 'h' }, { ...user, 'X-Worker-ID': 'worker-a' }),
    });
    errorBodies.push({
      what: 'shared token for a worker with its own',
      res: await call(
        url,
        'POST',
        '/api/v1/worker/worker-a/heartbeat',
        { hostname: 'h' },
        { 'X-Worker-ID': 'worker-a', 'X-Worker-Token': S.worker },
      ),
    });
    errorBodies.push({
      what: 'bearer token for another worker',
      res: await call(
        url,
        'POST',
        '/api/v1/worker/worker-b/heartbeat',
        { hostname: 'h' },
        { 'X-Worker-ID': 'worker-b', Authorization: `Bearer ${S.workerA}` },
      ),
    });
    errorBodies.push({ what: 'bad body', res: await call(url, 'POST', '/api/v1/sandboxes', { image: 5 }, user) });
    errorBodies.push({ what: 'unknown sandbox', res: await call(url, 'GET', '/api/v1/sandboxes/sb-nope', undefined, user) });
    const hb = await call(
      url,
      'POST',
      '/api/v1/worker/worker-a/heartbeat',
      { hostname: 'worker-a-host', capacity: { rpc_url: `https://rpc:${S.custom}@worker-a.invalid:7500/rpc` } },
      { 'X-Worker-ID': 'worker-a', 'X-Worker-Token': S.workerA },
    );
    expect(hb.status).toBe(200);
    for (const { what, res } of errorBodies) expect(res.status, what).toBeGreaterThanOrEqual(400);

    expect((await call(url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, user)).status).toBe(200);
    await events.until((f) => f.some((x) => x.event === 'sandbox.destroyed'));
    events.close();

    const outputs: Record<string, string> = {
      diagnostics: (await call(url, 'GET', '/api/v1/diagnostics', undefined, user)).text,
      'admin diagnostics': (await call(url, 'GET', '/api/v1/admin/diagnostics', undefined, admin)).text,
      metrics: (await call(url, 'GET', '/api/v1/metrics', undefined, user)).text,
      'admin metrics': (await call(url, 'GET', '/api/v1/admin/metrics', undefined, admin)).text,
      prometheus: (await call(url, 'GET', '/api/v1/metrics/prometheus', undefined, user)).text,
      'admin prometheus': (await call(url, 'GET', '/api/v1/admin/metrics/prometheus', undefined, admin)).text,
      'provider detail': (await call(url, 'GET', '/api/v1/providers/mock', undefined, user)).text,
      events: events.raw(),
      logs,
      ...Object.fromEntries(errorBodies.map(({ what, res }) => [`error body (${what})`, res.text])),
    };

    // The outputs are real: each shows what it should, so an empty page cannot pass the sweep.
    const diag = JSON.parse(outputs.diagnostics!);
    expect(diag.workers.items.map((w: { id: string }) => w.id)).toEqual(['local', 'worker-a']);
    expect(diag.workers.items[1].capacity.rpc_url).toBe('https://worker-a.invalid:7500/rpc');
    expect(diag.redactions).toEqual(
      expect.arrayContaining([
        'API keys',
        'worker tokens',
        'signing keys',
        'database credentials',
        'registry credentials',
        'provider secrets',
        'environment secrets',
      ]),
    );
    expect(outputs.prometheus).toContain('sbx_http_requests_total');
    expect(outputs.events).toContain('event: exec.completed');
    expect(outputs.events).toContain('event: exec.timeout');
    expect(outputs.events).toContain('"program":"true"');
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).toContain('mock');

    const forbidden = [...new Set([...Object.values(S), ...configured, `${S.api}-wrong`])];
    for (const [name, text] of Object.entries(outputs)) {
      for (const secret of forbidden) {
        expect(text.includes(secret), `${name} leaks ${secret.slice(0, 18)}…`).toBe(false);
      }
    }
  }, 30_000);
});
