/**
 * Smaller hardening of the worker RPC against a real worker and control plane: `worker.file_glob`
 * takes only patterns a local glob takes (an escaping one → 400); a buffered `worker.exec` keeps at
 * most `max_exec_output_mb` per stream, cut exactly as a local buffered exec cuts it; a terminal
 * (`tty`) is advertised only for a worker's providers that have one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import type { WorkerRecord } from '../../src/core/ports/index.js';
import { createRemoteWorkers } from '../../src/transports/worker-rpc/client/remote-provider.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'hardening-worker-token-0123456789abcdef';
const ID = 'wh';
const hdr = { 'x-worker-id': ID, 'x-worker-token': TOKEN };
/** 10 KiB: small enough that a test prints past it at once. */
const CAP_MB = 10 / 1024;

let cp: TestServer;
let local: TestServer;
let worker: Worker;
let dir: string;
let target: { sandbox_id: string; provider: string; runtime_id: string };

const rpcCall = (method: string, params: Record<string, unknown>) =>
  call(worker.rpcUrl!, 'POST', '/rpc', { id: 'h', method, worker_id: ID, params }, hdr);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-hardening-'));
  cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
  local = await startTestServer({ defaults: { max_exec_output_mb: CAP_MB } });
  worker = await startTestWorker(dir, {
    id: ID,
    controlPlane: cp.url,
    auth: { worker_token: TOKEN },
    defaults: { max_exec_output_mb: CAP_MB },
  });
  const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
  const rec = await cp.plane.deps.sandboxes.get(sb.body.id, { owner_id: null, admin: true });
  target = { sandbox_id: rec.id, provider: 'mock', runtime_id: rec.runtime_id! };
});

afterAll(async () => {
  await worker?.stop();
  await cp?.close();
  await local?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('worker.file_glob', () => {
  it('normalises like a local glob; a pattern escaping the root or not absolute → 400', async () => {
    for (const f of ['a.txt', 'b.txt'])
      expect(
        (await call(cp.url, 'POST', `/api/v1/sandboxes/${target.sandbox_id}/files`, { path: `/workspace/g/${f}`, content: f })).status,
      ).toBe(200);
    const ok = await rpcCall('worker.file_glob', { ...target, pattern: '/workspace//g/*.txt' });
    expect(ok.status).toBe(200);
    expect([...ok.body.result.matches].sort()).toEqual(['/workspace/g/a.txt', '/workspace/g/b.txt']);
    const up = await rpcCall('worker.file_glob', { ...target, pattern: '/workspace/../../../etc/*' });
    expect(up.status).toBe(400);
    expect(up.body.error).toEqual({ code: 'bad_request', message: 'pattern must not contain ".." segments' });
    const rel = await rpcCall('worker.file_glob', { ...target, pattern: '../*' });
    expect(rel.status).toBe(400);
    expect(rel.body.error.message).toBe('pattern must be absolute (start with /): "../*"');
    // The local API says the same words for the same pattern.
    const sb = await call(local.url, 'POST', '/api/v1/sandboxes', {});
    const viaApi = await call(
      local.url,
      'GET',
      `/api/v1/sandboxes/${sb.body.id}/files/glob?pattern=${encodeURIComponent('/workspace/../../../etc/*')}`,
    );
    expect([viaApi.status, viaApi.body.message]).toEqual([400, up.body.error.message]);
  });
});

describe('buffered worker.exec', () => {
  it('keeps max_exec_output_mb per stream and cuts exactly as a local buffered exec does', async () => {
    const command = "head -c 100000 /dev/zero | tr '\\0' a; head -c 50000 /dev/zero | tr '\\0' b >&2";
    const r = await rpcCall('worker.exec', { ...target, command, args: [], mode: 'shell', env: {} });
    expect(r.status).toBe(200);
    expect(r.body.result.truncated).toBe(true);
    const stdout = Buffer.from(r.body.result.stdout, 'base64').toString();
    const stderr = Buffer.from(r.body.result.stderr, 'base64').toString();
    const cap = Math.floor(CAP_MB * 1024 * 1024);
    expect(stdout).toBe(`${'a'.repeat(cap)}\n[sbx: output truncated, ${100000 - cap} bytes dropped]\n`);
    expect(stderr).toBe(`${'b'.repeat(cap)}\n[sbx: output truncated, ${50000 - cap} bytes dropped]\n`);
    const sb = await call(local.url, 'POST', '/api/v1/sandboxes', {});
    const here = await call(local.url, 'POST', `/api/v1/sandboxes/${sb.body.id}/exec`, { command });
    expect(here.status).toBe(200);
    expect({ stdout: here.body.stdout, stderr: here.body.stderr, truncated: here.body.truncated }).toEqual({
      stdout,
      stderr,
      truncated: true,
    });
  });
});

describe('tty is advertised per provider', () => {
  it('a mock worker does not claim a terminal; a worker whose docker has one does', async () => {
    const mock = (await call(cp.url, 'GET', '/api/v1/providers')).body.find((p: { name: string }) => p.name === 'mock');
    expect(mock.capabilities).not.toContain('tty');
    const w = (await call(cp.url, 'GET', `/api/v1/workers/${ID}`)).body as WorkerRecord;
    expect(w.capabilities).not.toContain('tty:mock');
    // A heartbeat as a docker worker sends it (`tty:docker`: its docker provider has terminals).
    const hb = await call(
      cp.url,
      'POST',
      '/api/v1/admin/workers/wd/heartbeat',
      { hostname: 'wd', status: 'online', providers: ['docker'], capabilities: ['spawn', 'exec', 'tty:docker'] },
      { 'x-worker-id': 'wd', 'x-worker-token': TOKEN },
    );
    expect(hb.status).toBe(200);
    cp.plane.deps.locator.forgetWorkers();
    const docker = (await call(cp.url, 'GET', '/api/v1/providers')).body.find((p: { name: string }) => p.name === 'docker');
    expect(docker.capabilities).toContain('tty');
    // The remote provider of a sandbox says the same.
    const remote = createRemoteWorkers({ credentials: { shared_token: TOKEN, tokens: {}, signing_keys: [], revoked_token_ids: [] } });
    const wd = (await call(cp.url, 'GET', '/api/v1/workers/wd')).body as WorkerRecord;
    const lease = async () => null;
    expect(remote.provider(wd, { sandbox_id: 'sb-x', provider: 'docker', lease }).capabilities).toContain('tty');
    expect(remote.provider(w, { sandbox_id: 'sb-y', provider: 'mock', lease }).capabilities).not.toContain('tty');
    await remote.close?.();
  });
});
