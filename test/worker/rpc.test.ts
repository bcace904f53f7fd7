/**
 * A real worker (createWorker: its SQLite state, the mock provider, its fastify RPC server on a
 * real port) heartbeating to a real control plane (`server.local_worker: false`): sandboxes placed
 * on it through the API, and its /rpc called directly with every rejection DESIGN.md §7 lists.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { AUD_CONTROL_PLANE, AUD_RPC } from '../../src/core/auth/worker-claims.js';
import { mintWorkerToken } from '../../src/transports/shared/worker-auth.js';
import { call } from '../helpers/http.js';
import { freePort, hostRequest, httpdInSandbox } from '../helpers/preview.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'shared-worker-token-0123456789abcdef';
const KEY = 'signing-key-0123456789abcdef0123456789';

let cp: TestServer;
let worker: Worker;
let dir: string;
let rpc: string;

async function startWorker(id = 'w1', controlPlane?: string): Promise<Worker> {
  return startTestWorker(dir, {
    id,
    controlPlane: controlPlane ?? cp.url,
    auth: { worker_token: TOKEN, worker_signing_key: KEY, worker_revoked_token_ids: ['revoked-jti'] },
    worker: { preview_domain: `${id}.preview.test` },
  });
}

const hdr = (token = TOKEN, id = 'w1') => ({ 'x-worker-id': id, 'x-worker-token': token });
const rpcCall = (body: unknown, headers: Record<string, string> = hdr()) => call(rpc, 'POST', '/rpc', body, headers);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-worker-'));
  cp = await startTestServer({
    server: { local_worker: false, preview_domain: 'cp.preview.test' },
    auth: { worker_token: TOKEN, worker_signing_key: KEY },
  });
  worker = await startWorker();
  rpc = worker.rpcUrl!;
});

afterAll(async () => {
  await worker?.stop();
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a sandbox on a remote worker, through the control plane', () => {
  it('a network per spawn travels to the worker: its mock provider shares the host network, 501, nothing left', async () => {
    const r = await call(cp.url, 'POST', '/api/v1/sandboxes', { network: 'none' });
    expect(r.status).toBe(501);
    expect(r.body).toEqual({
      code: 'not_implemented',
      message: `mock sandboxes share the host's network: network "none" needs the docker provider`,
    });
    const ok = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '1m' });
    expect(ok.body.network).toBe('host');
    await call(cp.url, 'DELETE', `/api/v1/sandboxes/${ok.body.id}`);
  });

  it('spawn → exec (buffered, streamed) → 9 MiB round trip → logs → extend → destroy', async () => {
    const workers = await call(cp.url, 'GET', '/api/v1/workers');
    expect(workers.body).toEqual([
      expect.objectContaining({ id: 'w1', status: 'online', providers: ['mock'], capacity: expect.objectContaining({ rpc_url: rpc }) }),
    ]);

    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    expect(sb.status).toBe(201);
    const id = sb.body.id as string;
    // DESIGN §7 (the anchor's remote-worker smoke test): the spawn answer and GET name the worker.
    expect(sb.body.worker_id).toBe('w1');
    expect((await call(cp.url, 'GET', `/api/v1/sandboxes/${id}`)).body.worker_id).toBe('w1');
    const diag = await call(cp.url, 'GET', '/api/v1/admin/diagnostics');
    expect(diag.body.scheduler).toMatchObject({ selected_worker_id: 'w1', eligible_workers: 1 });
    expect(diag.body.leases).toMatchObject({ total: 1, active: 1, by_holder: { w1: 1 } });

    const ex = await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo out; echo err >&2; exit 7' });
    expect(ex.body).toMatchObject({ exit_code: 7, stdout: 'out\n', stderr: 'err\n' });
    const st = await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: 'printf a; sleep 0.2; printf b',
      stream: true,
      exit_record: true,
    });
    const lines = st.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(
      lines
        .filter((l) => l.stream === 'stdout')
        .map((l) => l.data)
        .join(''),
    ).toBe('ab');
    expect(lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 0 });

    const big = randomBytes(9 * 1024 * 1024);
    const put = await fetch(`${cp.url}/api/v1/sandboxes/${id}/files?path=/tmp/big.bin`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: big,
    });
    expect(put.status).toBeLessThan(300);
    const got = Buffer.from(await (await fetch(`${cp.url}/api/v1/sandboxes/${id}/files?path=/tmp/big.bin`)).arrayBuffer());
    expect(createHash('sha256').update(got).digest('hex')).toBe(createHash('sha256').update(big).digest('hex'));

    const logs = await call(cp.url, 'GET', `/api/v1/sandboxes/${id}/logs`);
    expect(logs.status).toBe(200);

    const before = (await call(cp.url, 'GET', '/api/v1/admin/diagnostics')).body;
    const ext = await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/extend`, { ttl: '1h' });
    expect(ext.status).toBe(200);
    expect(Date.parse(ext.body.expires_at)).toBeGreaterThan(Date.parse(sb.body.expires_at));
    expect(before.leases.active).toBe(1);

    expect((await call(cp.url, 'DELETE', `/api/v1/sandboxes/${id}`)).body).toEqual({ status: 'destroyed' });
    expect((await call(cp.url, 'GET', '/api/v1/admin/diagnostics')).body.leases.total).toBe(0);
    expect((await call(cp.url, 'GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
  });
});

describe('live preview of a sandbox on a remote worker (DESIGN §9)', () => {
  it('through the control plane (forwarded at /rpc/preview with worker credentials) and at the worker by its own domain', async () => {
    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    const id = sb.body.id as string;
    // A remote-owned sandbox shows its worker's advertised domain (spec 2.1).
    expect(sb.body.preview_domain).toBe('w1.preview.test');
    expect(
      (await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/www/index.html', content: 'remote page' })).status,
    ).toBe(200);
    const port = await freePort();
    const stop = httpdInSandbox(cp.url, id, port);
    try {
      let via: Awaited<ReturnType<typeof hostRequest>> | null = null;
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        via = await hostRequest(cp.url, `${port}-${id}.cp.preview.test`, '/index.html').catch(() => null);
        if (via?.status === 200) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(`${via?.status} ${via?.body.toString()}`).toBe('200 remote page');
      const direct = await hostRequest(rpc, `${port}-${id}.w1.preview.test`, '/index.html');
      expect(direct.status).toBe(200);
      expect(direct.body.toString()).toBe('remote page');
      // The path route is the control plane's only: no worker credentials, no preview.
      const bare = await hostRequest(rpc, new URL(rpc).host, `/rpc/preview/${id}/${port}/index.html`);
      expect(bare.status).toBe(401);
      const closed = await hostRequest(cp.url, `${await freePort()}-${id}.cp.preview.test`, '/');
      expect(closed.status).toBe(502);
    } finally {
      // The client goes away first: the worker's call ends with it (the next test stops the worker).
      stop.abort();
      await call(cp.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    }
    const gone = await hostRequest(cp.url, `${port}-${id}.cp.preview.test`, '/');
    expect(gone.status).toBe(404);
  });
});

describe('live preview with server.preview_auth on a remote worker', () => {
  it("the worker's own preview host requires the token the control plane sent with the spawn", async () => {
    const cp2 = await startTestServer({
      server: { local_worker: false, preview_domain: 'cp2.preview.test', preview_auth: true },
      auth: { worker_token: TOKEN, worker_signing_key: KEY },
    });
    const w9 = await startWorker('w9', cp2.url);
    try {
      const sb = await call(cp2.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
      const id = sb.body.id as string;
      const token = sb.body.preview_token as string;
      expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(sb.body.preview_domain).toBe('w9.preview.test');
      await call(cp2.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/www/index.html', content: 'guarded page' });
      const port = await freePort();
      const stop = httpdInSandbox(cp2.url, id, port);
      try {
        const host = `${port}-${id}.w9.preview.test`;
        let ok: Awaited<ReturnType<typeof hostRequest>> | null = null;
        const deadline = Date.now() + 15_000;
        while (Date.now() < deadline) {
          ok = await hostRequest(w9.rpcUrl!, host, '/index.html', { headers: { 'x-sbx-preview-token': token } }).catch(() => null);
          if (ok?.status === 200) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        expect(`${ok?.status} ${ok?.body.toString()}`).toBe('200 guarded page');
        expect((await hostRequest(w9.rpcUrl!, host, '/index.html')).status).toBe(401);
        expect((await hostRequest(w9.rpcUrl!, host, '/index.html', { headers: { 'x-sbx-preview-token': 'y'.repeat(32) } })).status).toBe(
          401,
        );
        // Through the control plane the same token rule holds.
        expect((await hostRequest(cp2.url, `${port}-${id}.cp2.preview.test`, '/index.html')).status).toBe(401);
        expect(
          (await hostRequest(cp2.url, `${port}-${id}.cp2.preview.test`, '/index.html', { headers: { 'x-sbx-preview-token': token } }))
            .status,
        ).toBe(200);
      } finally {
        await call(cp2.url, 'DELETE', `/api/v1/sandboxes/${id}`);
        stop.abort();
      }
    } finally {
      await w9.stop();
      await cp2.close();
    }
  });
});

describe('the worker RPC refuses what DESIGN §7 says', () => {
  let target: { sandbox_id: string; provider: string; runtime_id: string };
  let lease: { resource_id: string; holder_id: string; generation: number; expires_at: string };

  beforeAll(async () => {
    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
    const leases = (await call(cp.url, 'GET', '/api/v1/admin/diagnostics')).body.leases;
    expect(leases.by_holder.w1).toBeGreaterThan(0);
    const status = await rpcCall({
      id: 'q1',
      method: 'worker.status',
      worker_id: 'w1',
      params: { sandbox_id: sb.body.id, provider: 'mock', runtime_id: 'x' },
    });
    expect(status.body.result.state).toBe('destroyed'); // an unknown runtime id is no runtime of that sandbox
    // The runtime id comes from the worker's own state through a status of the real one: list it via the store of the control plane.
    const rec = await cp.plane.deps.sandboxes.get(sb.body.id, { owner_id: null, admin: true });
    target = { sandbox_id: rec.id, provider: 'mock', runtime_id: rec.runtime_id! };
    const l = await cp.plane.deps.leases.list();
    lease = l.find((x) => x.resource_id === rec.id)!;
  });

  it('answers a real call with the envelope', async () => {
    const r = await rpcCall({
      id: 'e1',
      method: 'worker.exec',
      worker_id: 'w1',
      params: { ...target, command: 'echo hi', args: [], mode: 'shell', env: {} },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: 'e1',
      worker_id: 'w1',
      result: { exit_code: 0, stdout: Buffer.from('hi\n').toString('base64'), encoding: 'base64' },
    });
  });

  it('401: no credential, a user key, a control-plane token, a revoked token', async () => {
    const env = { id: 'a', method: 'worker.status', worker_id: 'w1', params: target };
    expect((await rpcCall(env, {})).status).toBe(401);
    expect((await rpcCall(env, { 'x-api-key': TOKEN })).status).toBe(401);
    const cpToken = mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_CONTROL_PLANE });
    const r = await rpcCall(env, hdr(cpToken));
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('unauthorized');
    expect(JSON.stringify(r.body)).not.toContain(KEY);
    expect((await rpcCall(env, hdr(mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_RPC, jti: 'revoked-jti' })))).status).toBe(401);
    expect((await rpcCall(env, hdr(mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_RPC })))).status).toBe(200);
  });

  it('403: another worker id, a missing scope, a foreign / expired / other-resource / older lease', async () => {
    expect((await rpcCall({ id: 'a', method: 'worker.status', worker_id: 'w1', params: target }, hdr(TOKEN, 'w2'))).status).toBe(403);
    expect((await rpcCall({ id: 'a', method: 'worker.status', worker_id: 'w2', params: target })).status).toBe(403);
    const narrow = mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_RPC, scopes: ['worker:status'] });
    expect(
      (
        await rpcCall(
          { id: 'a', method: 'worker.exec', worker_id: 'w1', params: { ...target, command: 'true', args: [], mode: 'shell', env: {} } },
          hdr(narrow),
        )
      ).status,
    ).toBe(403);
    const destroy = (l: unknown) => rpcCall({ id: 'd', method: 'worker.destroy', worker_id: 'w1', lease: l, params: target });
    expect((await destroy({ ...lease, holder_id: 'w2' })).status).toBe(403);
    expect((await destroy({ ...lease, expires_at: new Date(Date.now() - 1000).toISOString() })).status).toBe(403);
    expect((await destroy({ ...lease, resource_id: 'sb-other' })).status).toBe(403);
    // Renewal records a newer generation; the old one is then fenced off.
    const renewed = { ...lease, generation: lease.generation + 5 };
    expect(
      (
        await rpcCall({
          id: 'r',
          method: 'worker.renew_lease',
          worker_id: 'w1',
          lease: renewed,
          params: { resource_id: lease.resource_id },
        })
      ).status,
    ).toBe(200);
    const stale = await destroy(lease);
    expect(stale.status).toBe(403);
    expect(stale.body.error.message).toMatch(/older/);
    // Still there: nothing was destroyed by the refused calls.
    expect((await rpcCall({ id: 's', method: 'worker.status', worker_id: 'w1', params: target })).body.result.state).toBe('running');
  });

  it(
    'egress on the RPC (DESIGN §10): a filtered spawn on a provider that cannot enforce → 501; egress_update ' +
      'checks lease, rules and network',
    async () => {
      const spawnLease = { ...lease, resource_id: 'sb-filtered', generation: 1 };
      const spawn = (params: Record<string, unknown>) =>
        rpcCall({
          id: 'f',
          method: 'worker.spawn',
          worker_id: 'w1',
          lease: spawnLease,
          params: {
            sandbox_id: 'sb-filtered',
            provider: 'mock',
            image: 'i',
            memory_mb: 1,
            vcpus: 1,
            ttl: '1m',
            metadata: {},
            owner_id: null,
            ...params,
          },
        });
      const filtered = await spawn({ network: 'filtered', egress: { allow: ['pypi.org'], deny: [] } });
      expect(filtered.status).toBe(501);
      expect(filtered.body.error.message).toBe(
        'network "filtered" needs a provider that enforces egress rules (docker); provider mock on worker w1 cannot',
      );
      expect((await spawn({ network: 'bridge', egress: { allow: ['pypi.org'], deny: [] } })).status).toBe(400);
      const badRule = await spawn({ network: 'filtered', egress: { allow: ['*.*.bad'], deny: [] } });
      expect(badRule.status).toBe(400);
      expect(badRule.body.error.message).toContain('*.*.bad');
      // The test before fenced this lease at a newer generation than the store's: carry one past it.
      const stored = (await cp.plane.deps.leases.list()).find((x) => x.resource_id === target.sandbox_id)!;
      const current = { ...stored, generation: stored.generation + 100 };
      const update = (egress: unknown, l: unknown = current) =>
        rpcCall({ id: 'u', method: 'worker.egress_update', worker_id: 'w1', lease: l, params: { ...target, egress } });
      // No lease: 400; another resource's lease: 403; a bad rule: 400 naming it; a sandbox that is not filtered: 409.
      expect(
        (
          await rpcCall({
            id: 'u',
            method: 'worker.egress_update',
            worker_id: 'w1',
            params: { ...target, egress: { allow: [], deny: [] } },
          })
        ).body.error.message,
      ).toBe('this method needs a lease');
      expect((await update({ allow: [], deny: [] }, { ...current, resource_id: 'sb-other' })).status).toBe(403);
      const bad = await update({ allow: ['pypi.org:99999'], deny: [] });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain('pypi.org:99999');
      const notFiltered = await update({ allow: ['pypi.org'], deny: [] });
      expect(notFiltered.status).toBe(409);
      expect(notFiltered.body.error.code).toBe('conflict');
    },
  );

  it('400 malformed, 404 unknown runtime, 405 GET, 413 window, 501 unknown method', async () => {
    const bad = await call(rpc, 'POST', '/rpc', '{"id":', { ...hdr(), 'content-type': 'application/json' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ id: '', worker_id: 'w1', error: { code: 'bad_request' } });
    expect((await rpcCall({ method: 'worker.status', worker_id: 'w1', params: target })).status).toBe(400);
    expect(
      (
        await rpcCall({
          id: 'x',
          method: 'worker.spawn',
          worker_id: 'w1',
          params: { sandbox_id: 'sb-x', provider: 'mock', image: 'i', memory_mb: 1, vcpus: 1, ttl: '1m', metadata: {}, owner_id: null },
        })
      ).status,
    ).toBe(400);
    expect((await rpcCall({ id: 'x', method: 'worker.file_read', worker_id: 'w1', params: { ...target, path: 'relative' } })).status).toBe(
      400,
    );
    expect(
      (await rpcCall({ id: 'x', method: 'worker.file_write', worker_id: 'w1', params: { ...target, path: '/tmp/x', content: '%%%' } }))
        .status,
    ).toBe(400);
    expect(
      (await rpcCall({ id: 'x', method: 'worker.logs', worker_id: 'w1', params: { ...target, runtime_id: 'nope', lines: 10 } })).status,
    ).toBe(404);
    expect(
      (await rpcCall({ id: 'x', method: 'worker.logs', worker_id: 'w1', params: { ...target, provider: 'docker', lines: 10 } })).status,
    ).toBe(404);
    const get = await call(rpc, 'GET', '/rpc', undefined, hdr());
    expect(get.status).toBe(405);
    expect(get.body.error.code).toBe('method_not_allowed');
    const window = Buffer.alloc(4 * 1024 * 1024 + 1).toString('base64');
    expect(
      (await rpcCall({ id: 'x', method: 'worker.file_write', worker_id: 'w1', params: { ...target, path: '/tmp/x', content: window } }))
        .status,
    ).toBe(413);
    const unknown = await rpcCall({ id: 'u', method: 'worker.teleport', worker_id: 'w1', params: {} });
    expect(unknown.status).toBe(501);
    expect(unknown.body).toEqual({
      id: 'u',
      worker_id: 'w1',
      error: { code: 'not_implemented', message: 'unknown RPC method "worker.teleport"' },
    });
  });

  it('NDJSON exec_stream flushes a chunk before the command ends', async () => {
    const res = await fetch(`${rpc}/rpc`, {
      method: 'POST',
      headers: { ...hdr(), 'content-type': 'application/json', 'x-worker-stream': 'ndjson' },
      body: JSON.stringify({
        id: 's1',
        method: 'worker.exec_stream',
        worker_id: 'w1',
        params: { ...target, command: 'echo first; sleep 1; echo second', args: [], mode: 'shell', env: {} },
      }),
    });
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const reader = res.body!.getReader();
    const started = Date.now();
    // Blank lines (the one that sends the headers at once, keep-alives) carry nothing.
    let head = '';
    while (head.trim() === '') {
      const { value, done } = await reader.read();
      if (done) break;
      head += Buffer.from(value!).toString('utf8');
    }
    expect(Date.now() - started).toBeLessThan(900);
    const first = JSON.parse(head.split('\n').find((l) => l.trim() !== '')!);
    expect(first).toEqual({
      id: 's1',
      worker_id: 'w1',
      result: { stream: 'stdout', data: Buffer.from('first\n').toString('base64'), encoding: 'base64' },
    });
    let rest = '';
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      rest += Buffer.from(r.value).toString('utf8');
    }
    expect(JSON.parse(rest.trim().split('\n').at(-1)!).result).toMatchObject({ stream: 'exit', exit_code: 0 });
  });

  it('drain: spawns answer 503 on the worker and through the control plane; running sandboxes still answer', async () => {
    // The tests above fenced `target` at generations past the store's: its own control plane is a stale owner now.
    const fresh = (await call(cp.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const drained = await call(cp.url, 'POST', '/api/v1/admin/workers/w1/drain');
    expect(drained.body).toMatchObject({ id: 'w1', status: 'draining' });
    const spawn = await rpcCall({
      id: 'sp',
      method: 'worker.spawn',
      worker_id: 'w1',
      lease: { ...lease, resource_id: 'sb-new' },
      params: { sandbox_id: 'sb-new', provider: 'mock', image: 'i', memory_mb: 1, vcpus: 1, ttl: '1m', metadata: {}, owner_id: null },
    });
    expect(spawn.status).toBe(503);
    expect((await call(cp.url, 'POST', '/api/v1/sandboxes', {})).status).toBe(503);
    const ex = await call(cp.url, 'POST', `/api/v1/sandboxes/${fresh}/exec`, { command: 'echo alive' });
    expect(ex.body.stdout).toBe('alive\n');
    expect((await call(cp.url, 'POST', '/api/v1/admin/workers/local/drain')).status).toBe(404);
    expect((await call(cp.url, 'POST', '/api/v1/admin/workers/nope/drain')).status).toBe(404);
    // A heartbeat-only worker (no rpc_url) cannot be told anything: 409, not an outage.
    await call(cp.url, 'POST', '/api/v1/admin/workers/w-quiet/heartbeat', { hostname: 'quiet', status: 'online', providers: ['mock'] });
    const quiet = await call(cp.url, 'POST', '/api/v1/admin/workers/w-quiet/drain');
    expect(quiet.status).toBe(409);
    expect(quiet.body.message).toBe(
      'worker w-quiet advertises no rpc_url: it cannot be drained from here; stop its sbx worker with SIGTERM',
    );
  });

  it('a restarted worker keeps its runtimes and the newest generation it saw', async () => {
    await worker.stop();
    worker = await startWorker();
    rpc = worker.rpcUrl!;
    expect((await rpcCall({ id: 's', method: 'worker.status', worker_id: 'w1', params: target })).body.result.state).toBe('running');
    const stale = await rpcCall({ id: 'd', method: 'worker.destroy', worker_id: 'w1', lease, params: target });
    expect(stale.status).toBe(403);
  });
});

describe('sbx worker --once', () => {
  it('one heartbeat: exit 0 and the worker is online (not draining); an unreachable control plane: exit 1, one line', async () => {
    const { workerCommand } = await import('../../src/transports/cli/commands/worker.js');
    const { runCommand } = await import('../../src/transports/cli/run-command.js');
    const { fakeCli } = await import('../helpers/cli-context.js');
    const env = {
      SVC_AUTH_WORKER_TOKEN: TOKEN,
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'once-mock'),
      SVC_LOGGING_LEVEL: 'silent',
    };
    const ok = fakeCli({ url: cp.url, home: dir });
    (ok.ctx as { env: Record<string, string> }).env = env;
    expect(await runCommand(workerCommand, ok.ctx, { once: true, controlPlane: cp.url, id: 'w-once' })).toBe(0);
    expect(ok.stdout()).toBe(`worker w-once: heartbeat accepted by ${cp.url}\n`);
    const w = await call(cp.url, 'GET', '/api/v1/workers/w-once');
    expect(w.body).toMatchObject({ id: 'w-once', status: 'online', providers: ['mock'] });
    const bad = fakeCli({ url: cp.url, home: dir });
    (bad.ctx as { env: Record<string, string> }).env = env;
    expect(await runCommand(workerCommand, bad.ctx, { once: true, controlPlane: 'http://127.0.0.1:9', id: 'w-once' })).toBe(1);
    expect(bad.stderr()).toMatch(/^sbx: heartbeat failed: http:\/\/127\.0\.0\.1:9: .*\n$/);
    expect(bad.stderr().split('\n').filter(Boolean)).toHaveLength(1);
    await ok.close();
    await bad.close();
  });
});
