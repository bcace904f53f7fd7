/**
 * The control plane's side of the worker RPC against peers that misbehave (real node:http servers
 * that answer garbage, the wrong envelope, or drop a stream half way) and against a real worker
 * over mutual TLS with certificates made by openssl at test time.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import type { WorkerRecord } from '../../src/core/ports/index.js';
import { rpcToken } from '../../src/transports/worker-rpc/client/credentials.js';
import { createRemoteWorkers } from '../../src/transports/worker-rpc/client/remote-provider.js';
import { runWithRequestId } from '../../src/transports/shared/request-context.js';
import { verifyWorkerToken } from '../../src/core/auth/worker-credentials.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const creds = { shared_token: 'shared', tokens: {}, signing_keys: [], revoked_token_ids: [] };
const workerAt = (url: string, id = 'wx'): WorkerRecord => {
  const at = new Date().toISOString();
  return {
    id,
    hostname: id,
    status: 'online',
    providers: ['mock'],
    capabilities: [],
    capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0, rpc_url: url },
    last_heartbeat: at,
    created_at: at,
    updated_at: at,
  };
};
const target = { sandbox_id: 'sb-1', provider: 'mock', runtime_id: 'rt-1', lease: async () => null };

describe('credentials', () => {
  it('per-worker token, else a minted worker:rpc token, else the shared token; none → unreachable', () => {
    const now = new Date();
    expect(rpcToken({ ...creds, tokens: { w1: 'own' }, signing_keys: ['k'.repeat(32)] }, 'w1', now)).toBe('own');
    const minted = rpcToken({ ...creds, signing_keys: ['k'.repeat(32)] }, 'w1', now)!;
    const id = verifyWorkerToken(minted, { keys: ['k'.repeat(32)], audience: 'worker:rpc', workerId: 'w1', now, revoked: [] });
    expect(id.worker_id).toBe('w1');
    expect(Date.parse(id.expires!) - now.getTime()).toBeLessThanOrEqual(5 * 60_000);
    expect(rpcToken(creds, 'w1', now)).toBe('shared');
    const none = createRemoteWorkers({ credentials: { ...creds, shared_token: '' } });
    expect(none.unreachableReason(workerAt('http://127.0.0.1:1'))).toMatch(/no credential for worker wx/);
    expect(none.unreachableReason({ ...workerAt(''), capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0 } })).toBe(
      'worker wx advertises no rpc_url',
    );
  });
});

describe('a misbehaving worker', () => {
  let server: Server;
  let url: string;
  let mode = 'garbage';
  let seen: Record<string, string | string[] | undefined> = {};

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen = req.headers;
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const id = (JSON.parse(body) as { id: string }).id;
        if (mode === 'garbage') return res.end('<html>proxy error: secret-backend-text</html>');
        if (mode === 'wrong-id') return res.end(JSON.stringify({ id: 'other', worker_id: 'wx', result: {} }));
        if (mode === 'typed')
          return res
            .writeHead(500)
            .end(JSON.stringify({ id, worker_id: 'wx', error: { code: 'provider_error', message: 'provider failed' } }));
        if (mode === 'midstream') {
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.write(
            JSON.stringify({
              id,
              worker_id: 'wx',
              result: { stream: 'stdout', data: Buffer.from('part').toString('base64'), encoding: 'base64' },
            }) + '\n',
          );
          setTimeout(() => res.socket?.destroy(), 100);
          return;
        }
        if (mode === 'hang') return; // never answers
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('garbage or another envelope → provider_error without the body; typed errors keep their code', async () => {
    const remote = createRemoteWorkers({ credentials: creds });
    const p = remote.provider(workerAt(url), target);
    mode = 'garbage';
    const e1 = (await p.status('rt-1').catch((e: unknown) => e)) as Error & { code: string };
    expect(e1).toMatchObject({ code: 'provider_error', message: 'worker wx answered an invalid RPC response' });
    expect(String(e1.message)).not.toContain('secret-backend-text');
    mode = 'wrong-id';
    await expect(p.status('rt-1')).rejects.toMatchObject({ code: 'provider_error' });
    mode = 'typed';
    await expect(p.listFiles('rt-1', '/')).rejects.toMatchObject({ code: 'provider_error', message: 'provider failed' });
    // X-Request-ID carried over from the API request being served.
    await runWithRequestId('req-abc-123', () => p.status('rt-1').catch(() => undefined));
    expect(seen['x-request-id']).toBe('req-abc-123');
    expect(seen['x-worker-id']).toBe('wx');
    await remote.close?.();
  });

  it('a stream cut half way is a clean `unavailable`, at once', async () => {
    const remote = createRemoteWorkers({ credentials: creds });
    mode = 'midstream';
    const started = Date.now();
    const got: string[] = [];
    let failure: unknown;
    try {
      for await (const ev of remote
        .provider(workerAt(url), target)
        .exec('rt-1', { command: 'x', args: [], mode: 'shell', env: {} }, new AbortController().signal)) {
        if (ev.stream !== 'exit') got.push(Buffer.from(ev.data).toString());
      }
    } catch (err) {
      failure = err;
    }
    expect(got).toEqual(['part']);
    expect(failure).toMatchObject({ code: 'unavailable', message: 'lost the connection to worker wx during exec' });
    expect(Date.now() - started).toBeLessThan(3000);
    await remote.close?.();
  });

  it('a worker that never answers fails by the deadline; a closed port is unreachable', async () => {
    const remote = createRemoteWorkers({ credentials: creds, callTimeoutMs: 300 });
    mode = 'hang';
    await expect(remote.provider(workerAt(url), target).status('rt-1')).rejects.toMatchObject({
      code: 'unavailable',
      message: 'worker wx is unreachable',
    });
    await expect(remote.provider(workerAt('http://127.0.0.1:1'), target).status('rt-1')).rejects.toMatchObject({ code: 'unavailable' });
    await remote.close?.();
  });
});

describe('mutual TLS on the worker RPC', () => {
  let dir: string;
  let cp: TestServer;
  let worker: Worker;
  const files = (n: string) => join(dir, n);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-mtls-'));
    const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=sbx test CA');
    writeFileSync(files('san.ext'), 'subjectAltName=DNS:worker.test,IP:127.0.0.1\n');
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'worker.key', '-out', 'worker.csr', '-subj', '/CN=worker.test');
    ssl(
      'x509',
      '-req',
      '-in',
      'worker.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'worker.pem',
      '-days',
      '1',
      '-extfile',
      'san.ext',
    );
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'cp.key', '-out', 'cp.csr', '-subj', '/CN=control-plane');
    ssl('x509', '-req', '-in', 'cp.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cp.pem', '-days', '1');
    const tls = {
      enabled: true,
      ca_file: files('ca.pem'),
      client_cert_file: files('cp.pem'),
      client_key_file: files('cp.key'),
      server_name: 'worker.test',
    };
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'mtls-token' }, worker: { rpc_tls: tls } });
    worker = await startTestWorker(dir, {
      id: 'tw',
      controlPlane: cp.url,
      auth: { worker_token: 'mtls-token' },
      worker: {
        state_path: files('tw.db'),
        rpc_tls: {
          enabled: true,
          server_cert_file: files('worker.pem'),
          server_key_file: files('worker.key'),
          client_ca_file: files('ca.pem'),
        },
      },
    });
  });
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('spawn and exec through a worker that requires client certificates', async () => {
    expect(worker.rpcUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const sb = await fetch(`${cp.url}/api/v1/sandboxes`, { method: 'POST' });
    expect(sb.status).toBe(201);
    const id = ((await sb.json()) as { id: string }).id;
    const ex = await fetch(`${cp.url}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo over-tls' }),
    });
    expect(((await ex.json()) as { stdout: string }).stdout).toBe('over-tls\n');
  });

  it('refuses a caller without a client certificate, a wrong server name and plain http', async () => {
    const w = workerAt(worker.rpcUrl!, 'tw');
    const noCert = createRemoteWorkers({
      credentials: { ...creds, shared_token: 'mtls-token' },
      tls: { enabled: true, ca_file: files('ca.pem'), server_name: 'worker.test' },
    });
    await expect(noCert.provider(w, target).status('rt-1')).rejects.toMatchObject({ code: 'unavailable' });
    await noCert.close?.();
    const wrongName = createRemoteWorkers({
      credentials: { ...creds, shared_token: 'mtls-token' },
      tls: {
        enabled: true,
        ca_file: files('ca.pem'),
        client_cert_file: files('cp.pem'),
        client_key_file: files('cp.key'),
        server_name: 'other.test',
      },
    });
    await expect(wrongName.provider(w, target).status('rt-1')).rejects.toMatchObject({ code: 'unavailable' });
    await wrongName.close?.();
    const plain = createRemoteWorkers({ credentials: { ...creds, shared_token: 'mtls-token' } });
    await expect(plain.provider(workerAt(worker.rpcUrl!.replace('https:', 'http:'), 'tw'), target).status('rt-1')).rejects.toMatchObject({
      code: 'unavailable',
    });
    await plain.close?.();
    expect(readFileSync(files('worker.pem'), 'utf8')).toContain('BEGIN CERTIFICATE');
  });
});
