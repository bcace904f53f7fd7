/**
 * Several machines for real (issue 11): a control plane and two `sbx worker` processes in three
 * network namespaces with their own addresses and data directories, talking over veth links.
 * Linux and root only: skipped with the reason elsewhere, mandatory (a missing capability fails)
 * when SBX_TEST_NETNS=1, as `.ci/run` sets it.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, buildNet, netnsUnavailable, startSbx, sweepStale, type Net, type Proc } from './netns.js';

const why = netnsUnavailable();
const mandatory = process.env.SBX_TEST_NETNS === '1';
if (why && mandatory) throw new Error(`SBX_TEST_NETNS=1 but ${why}`);
if (why) console.warn(`multi-host suite skipped: ${why}`);

const TOKEN = randomBytes(24).toString('hex');
const PORT = 7423;
const RPC_PORT = 7430;

let net: Net;
let dir: string;
let cp: Proc | undefined;
let w1: Proc | undefined;
let w2: Proc | undefined;
let cpUrl: string;
const ids: Record<string, string> = {};

const json = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(cpUrl + path, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed, text };
};

/** The `sbx` CLI from the root namespace against the control plane. */
const sbx = (args: string[], input?: Buffer | string) => {
  const r = spawnSync(process.execPath, [BIN, '--url', cpUrl, ...args], {
    input,
    env: { PATH: process.env.PATH ?? '', HOME: dir },
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
};

async function startCp(): Promise<Proc> {
  return startSbx(
    net.hosts.cp!,
    join(dir, 'cp'),
    ['serve', '--host', net.hosts.cp!.addr, '--port', String(PORT)],
    { SVC_SERVER_LOCAL_WORKER: 'false', SVC_AUTH_WORKER_TOKEN: TOKEN },
    /listening on/,
  );
}

async function startWorker(name: 'w1' | 'w2'): Promise<Proc> {
  const h = net.hosts[name]!;
  return startSbx(
    h,
    join(dir, name),
    [
      'worker',
      '--id',
      name,
      '--control-plane',
      `http://${net.hosts.cp!.addr}:${PORT}`,
      '--listen',
      `${h.addr}:${RPC_PORT}`,
      '--heartbeat-interval',
      '1s',
    ],
    { SVC_PROVIDERS_DEFAULT: 'mock', SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, name, 'mock'), SVC_AUTH_WORKER_TOKEN: TOKEN },
    new RegExp(`sbx worker ${name} up`),
  );
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const byWorker = async () => (await json('GET', '/api/v1/admin/diagnostics')).body.sandboxes.by_worker as Record<string, number>;

describe.skipIf(why !== null)('several machines: a control plane and two workers in network namespaces', () => {
  beforeAll(async () => {
    sweepStale();
    net = buildNet(['cp', 'w1', 'w2']);
    dir = mkdtempSync(join(tmpdir(), 'sbx-multihost-'));
    cpUrl = `http://${net.hosts.cp!.addr}:${PORT}`;
    cp = await startCp();
    [w1, w2] = await Promise.all([startWorker('w1'), startWorker('w2')]);
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled([w1?.kill('SIGKILL'), w2?.kill('SIGKILL'), cp?.kill('SIGKILL')]);
    net?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('registers both workers and spreads spawns over them', async () => {
    await until('both workers online', async () => {
      const ws = (await json('GET', '/api/v1/workers')).body as Array<{ id: string; status: string; capacity: { rpc_url?: string } }>;
      return ws.filter((w) => w.status === 'online' && w.capacity.rpc_url).length === 2 ? ws : undefined;
    });
    for (let i = 0; i < 2; i++) {
      const r = await json('POST', '/api/v1/sandboxes', { ttl: '30m' });
      expect(r.status).toBe(201);
    }
    expect(await byWorker()).toEqual({ w1: 1, w2: 1 });
    expect((await json('GET', '/api/v1/admin/diagnostics')).body.leases.by_holder).toEqual({ w1: 1, w2: 1 });
    for (const s of (await json('GET', '/api/v1/sandboxes')).body as Array<{ id: string }>) ids[s.id] = s.id;
  });

  it('exec (buffered, streamed, WebSocket), a 9 MiB file, logs, extend and destroy through the control plane', async () => {
    for (const id of Object.keys(ids).filter((k) => k.startsWith('sb-'))) {
      const b = await json('POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo out-$((6*7)); echo err >&2; exit 3' });
      expect(b.body).toMatchObject({ exit_code: 3, stdout: 'out-42\n', stderr: 'err\n' });
      const s = await json('POST', `/api/v1/sandboxes/${id}/exec`, {
        command: 'for i in 1 2 3; do echo $i; done',
        stream: true,
        exit_record: true,
      });
      const lines = s.text
        .trim()
        .split('\n')
        .map((l: string) => JSON.parse(l));
      expect(
        lines
          .filter((l: { stream: string }) => l.stream === 'stdout')
          .map((l: { data: string }) => l.data)
          .join(''),
      ).toBe('1\n2\n3\n');
      expect(lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 0 });
      const ws = sbx(['exec', '-i', id, 'sh', '-c', 'tr a-z A-Z'], 'over the websocket\n');
      expect(ws).toMatchObject({ code: 0, stdout: 'OVER THE WEBSOCKET\n' });

      const big = randomBytes(9 * 1024 * 1024);
      writeFileSync(join(dir, 'big.bin'), big);
      expect(sbx(['files', 'put', join(dir, 'big.bin'), `${id}:/tmp/big.bin`]).code).toBe(0);
      expect(sbx(['files', 'get', `${id}:/tmp/big.bin`, join(dir, 'back.bin')]).code).toBe(0);
      expect(
        createHash('sha256')
          .update(readFileSync(join(dir, 'back.bin')))
          .digest('hex'),
      ).toBe(createHash('sha256').update(big).digest('hex'));

      const logs = await json('GET', `/api/v1/sandboxes/${id}/logs`);
      expect(logs.status).toBe(200);
      const before = (await json('GET', `/api/v1/sandboxes/${id}`)).body.expires_at;
      const ext = await json('POST', `/api/v1/sandboxes/${id}/extend`, { ttl: '2h' });
      expect(Date.parse(ext.body.expires_at)).toBeGreaterThan(Date.parse(before));
    }
    const extra = await json('POST', '/api/v1/sandboxes', {});
    expect((await json('DELETE', `/api/v1/sandboxes/${extra.body.id}`)).body).toEqual({ status: 'destroyed' });
    expect((await json('GET', `/api/v1/sandboxes/${extra.body.id}`)).status).toBe(404);
    expect(await byWorker()).toEqual({ w1: 1, w2: 1 });
  }, 120_000);

  it('a worker called directly refuses user keys, other workers, foreign leases, unknown methods and GET', async () => {
    const url = `http://${net.hosts.w1!.addr}:${RPC_PORT}/rpc`;
    const post = async (body: unknown, headers: Record<string, string>) => {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      return { status: r.status, body: (await r.json()) as { error?: { code: string } } };
    };
    const ok = { 'x-worker-id': 'w1', 'x-worker-token': TOKEN };
    const env = { id: 'x', method: 'worker.status', worker_id: 'w1', params: { sandbox_id: 'sb-a', provider: 'mock', runtime_id: 'r' } };
    expect((await post(env, { 'x-api-key': TOKEN })).status).toBe(401);
    expect((await post(env, { 'x-worker-id': 'w2', 'x-worker-token': TOKEN })).status).toBe(403);
    const lease = { resource_id: 'sb-other', holder_id: 'w1', generation: 1, expires_at: new Date(Date.now() + 60_000).toISOString() };
    const foreign = await post(
      { id: 'd', method: 'worker.destroy', worker_id: 'w1', lease, params: { sandbox_id: 'sb-a', provider: 'mock', runtime_id: 'r' } },
      ok,
    );
    expect(foreign.status).toBe(403);
    expect((await post({ id: 'u', method: 'worker.nope', worker_id: 'w1', params: {} }, ok)).body.error?.code).toBe('not_implemented');
    expect((await fetch(url, { headers: ok })).status).toBe(405);
  });

  it('SIGKILL of a worker and a control-plane restart: its sandboxes unhealthy, the other keeps working, new ' +
    'spawns go to the survivor', async () => {
    const sandboxes = (await json('GET', '/api/v1/sandboxes')).body as Array<{ id: string }>;
    await w1!.kill('SIGKILL');
    await cp!.kill('SIGTERM');
    cp = await startCp();
    const states = new Map<string, string>();
    for (const s of sandboxes) states.set(s.id, (await json('GET', `/api/v1/sandboxes/${s.id}`)).body.state);
    expect([...states.values()].sort()).toEqual(['running', 'unhealthy']);
    expect(cp.log()).toMatch(
      /"action":"mark_unhealthy".*"reason":"worker_unreachable"|"reason":"worker_unreachable".*"action":"mark_unhealthy"/,
    );
    const survivor = [...states].find(([, st]) => st === 'running')![0];
    expect((await json('POST', `/api/v1/sandboxes/${survivor}/exec`, { command: 'echo still' })).body.stdout).toBe('still\n');
    const fresh = await json('POST', '/api/v1/sandboxes', {});
    expect(fresh.status).toBe(201);
    expect((await byWorker()).w2).toBe(2);
    ids.survivor = survivor;
  }, 60_000);

  it('a link cut mid-stream ends the stream cleanly within its deadline, nothing hangs', async () => {
    const id = ids.survivor!;
    const started = Date.now();
    const res = await fetch(`${cpUrl}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        command: 'i=0; while [ $i -lt 600 ]; do echo $i; i=$((i+1)); sleep 0.1; done',
        stream: true,
        exit_record: true,
      }),
    });
    const reader = res.body!.getReader();
    let text = '';
    const first = await reader.read();
    text += Buffer.from(first.value!).toString();
    net.cut('w2');
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        text += Buffer.from(r.value).toString();
      }
    } finally {
      net.restore('w2');
    }
    const elapsed = Date.now() - started;
    const last = JSON.parse(text.trim().split('\n').at(-1)!);
    expect(last).toMatchObject({ stream: 'exit', exit_code: 125, error: { code: 'unavailable' } });
    expect(elapsed).toBeLessThan(30_000);
    // The link is back: the worker answers again.
    await until(
      'w2 answering again',
      async () =>
        (await json('POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo back' })).body.stdout === 'back\n' ? true : undefined,
      30_000,
    );
  }, 90_000);

  it('draining the survivor: new spawns 503, running sandboxes still answer', async () => {
    const d = await json('POST', '/api/v1/admin/workers/w2/drain');
    expect(d.body).toMatchObject({ id: 'w2', status: 'draining' });
    expect((await json('POST', '/api/v1/sandboxes', {})).status).toBe(503);
    expect((await json('POST', `/api/v1/sandboxes/${ids.survivor}/exec`, { command: 'echo draining-ok' })).body.stdout).toBe(
      'draining-ok\n',
    );
    // SIGTERM: the worker drains and exits 0, leaving its sandboxes running.
    expect(await w2!.kill('SIGTERM')).toBe(0);
    w2 = undefined;
  }, 60_000);
});
