/**
 * Lease fencing on a real `sbx worker` over real HTTP (DESIGN.md §7 "Fencing"): for every RPC method
 * that changes a sandbox, a lease older than the newest generation the worker has seen is 403
 * naming it and changes nothing (checked on the files, the runtime, the state afterwards); no lease
 * is still served where the spec says "lease: no" (exec, files, snapshot) and is 400 where a lease
 * is required; a newer generation is served and recorded. Also through a control plane whose view
 * is stale: its exec, file and process calls are refused, its files untouched.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Worker } from '../../src/compose/worker.js';
import { RPC_LEASE_POLICY } from '../../src/contracts/worker-rpc.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'fencing-worker-token-0123456789abcdef';
const ID = 'wf';
const hdr = { 'x-worker-id': ID, 'x-worker-token': TOKEN };

type Lease = { resource_id: string; holder_id: string; generation: number; expires_at: string };
type Target = { sandbox_id: string; provider: string; runtime_id: string };

let cp: TestServer;
let worker: Worker;
let dir: string;
let rpc: string;

const rpcCall = (method: string, params: Record<string, unknown>, lease?: Lease) =>
  call(rpc, 'POST', '/rpc', { id: 'f', method, worker_id: ID, params, ...(lease ? { lease } : {}) }, hdr);

/** A sandbox spawned through the control plane: its runtime and its stored lease. */
async function sandbox(): Promise<{ target: Target; lease: Lease }> {
  const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
  expect(sb.status).toBe(201);
  const rec = await cp.plane.deps.sandboxes.get(sb.body.id, { owner_id: null, admin: true });
  const lease = (await cp.plane.deps.leases.list()).find((l) => l.resource_id === rec.id)!;
  return { target: { sandbox_id: rec.id, provider: 'mock', runtime_id: rec.runtime_id! }, lease };
}

/** Tells the worker a newer owner exists (what another control plane's renewal does). */
async function newest(lease: Lease, generation: number): Promise<Lease> {
  const l = { ...lease, generation };
  const r = await rpcCall('worker.renew_lease', { resource_id: lease.resource_id }, l);
  expect(r.status).toBe(200);
  return l;
}

async function stat(t: Target, path: string): Promise<{ status: number; mode?: string }> {
  const r = await rpcCall('worker.file_stat', { ...t, path });
  return { status: r.status, mode: r.body.result?.file?.mode };
}

const write = (t: Target, path: string, text: string, lease?: Lease) =>
  rpcCall('worker.file_write', { ...t, path, content: Buffer.from(text).toString('base64') }, lease);

const exec = (t: Target, command: string) => ({ ...t, command, args: [], mode: 'shell', env: {} });

/** An exec_stream call as NDJSON: its status and the envelope lines. */
async function execStream(t: Target, command: string, lease?: Lease): Promise<{ status: number; lines: any[] }> {
  const res = await fetch(`${rpc}/rpc`, {
    method: 'POST',
    headers: { ...hdr, 'content-type': 'application/json', 'x-worker-stream': 'ndjson' },
    body: JSON.stringify({ id: 's', method: 'worker.exec_stream', worker_id: ID, params: exec(t, command), ...(lease ? { lease } : {}) }),
  });
  const text = await res.text();
  return {
    status: res.status,
    lines: text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l)),
  };
}

/** The interactive exec's upgrade with a lease header: the refusal status, or the exit code once run. */
function execSocket(t: Target, command: string, lease?: Lease): Promise<{ status?: number; body?: any; exit_code?: number }> {
  const url = `${rpc.replace(/^http/, 'ws')}/rpc/exec/ws?${new URLSearchParams(t).toString()}`;
  const headers = { ...hdr, ...(lease ? { 'x-worker-lease': JSON.stringify(lease) } : {}) };
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const timer = setTimeout(() => (ws.terminate(), reject(new Error('exec socket timed out'))), 10_000);
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => (clearTimeout(timer), resolve({ status: res.statusCode, body: JSON.parse(text) })));
    });
    ws.on('open', () => ws.send(JSON.stringify({ type: 'start', command, args: [], mode: 'shell', env: {} })));
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString('utf8'));
      if (m.type === 'exit') {
        clearTimeout(timer);
        ws.close();
        resolve({ exit_code: m.exit_code });
      }
    });
    ws.on('error', (err) => (clearTimeout(timer), reject(err)));
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-fencing-'));
  cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
  worker = await startTestWorker(dir, { id: ID, controlPlane: cp.url, auth: { worker_token: TOKEN } });
  rpc = worker.rpcUrl!;
});

afterAll(async () => {
  await worker?.stop();
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the fencing table', () => {
  it(
    'names every method: required for spawn/destroy/renew/egress/fork/pause/resume, optional for the other ' +
      'calls that change a sandbox',
    () => {
      const by = (p: string) =>
        Object.entries(RPC_LEASE_POLICY)
          .filter(([, v]) => v === p)
          .map(([m]) => m)
          .sort();
      expect(by('required')).toEqual([
        'worker.destroy',
        'worker.egress_update',
        'worker.fork',
        'worker.pause',
        'worker.renew_lease',
        'worker.resume',
        'worker.spawn',
      ]);
      expect(by('optional')).toEqual([
        'worker.exec',
        'worker.exec_stream',
        'worker.file_chmod',
        'worker.file_delete',
        'worker.file_move',
        'worker.file_write',
        'worker.snapshot',
      ]);
    },
  );
});

describe('a stale lease: 403 naming the generation, nothing changed', () => {
  let t: Target;
  let stale: Lease;

  beforeAll(async () => {
    const sb = await sandbox();
    t = sb.target;
    expect((await write(t, '/workspace/keep.txt', 'kept')).status).toBe(200);
    expect((await rpcCall('worker.file_chmod', { ...t, path: '/workspace/keep.txt', mode: 0o644 })).status).toBe(200);
    await newest(sb.lease, sb.lease.generation + 10);
    stale = { ...sb.lease, generation: sb.lease.generation + 9 };
  });

  const refused = (r: { status: number; body: any }) => {
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('forbidden');
    expect(r.body.error.message).toBe(
      `the lease generation ${stale.generation} of ${t.sandbox_id} is older than generation ` +
        `${stale.generation + 1}, the newest this worker has seen`,
    );
  };

  it('exec (buffered, NDJSON stream, WebSocket): refused before the command runs', async () => {
    refused(await rpcCall('worker.exec', exec(t, 'touch ran-exec'), stale));
    const streamed = await execStream(t, 'touch ran-stream', stale);
    expect(streamed.status).toBe(403);
    expect(streamed.lines[0].error.message).toContain(`generation ${stale.generation}`);
    const socket = await execSocket(t, 'touch ran-socket', stale);
    expect(socket.status).toBe(403);
    expect(socket.body.error.message).toContain(`generation ${stale.generation}`);
    for (const f of ['ran-exec', 'ran-stream', 'ran-socket']) expect((await stat(t, `/workspace/${f}`)).status).toBe(404);
  });

  it('file_write / file_delete / file_move / file_chmod: the files are as they were', async () => {
    refused(await write(t, '/workspace/new.txt', 'x', stale));
    refused(await write(t, '/workspace/keep.txt', 'overwritten', stale));
    refused(await rpcCall('worker.file_delete', { ...t, path: '/workspace/keep.txt', recursive: false }, stale));
    refused(await rpcCall('worker.file_move', { ...t, old_path: '/workspace/keep.txt', new_path: '/workspace/moved.txt' }, stale));
    refused(await rpcCall('worker.file_chmod', { ...t, path: '/workspace/keep.txt', mode: 0o600 }, stale));
    expect((await stat(t, '/workspace/new.txt')).status).toBe(404);
    expect((await stat(t, '/workspace/moved.txt')).status).toBe(404);
    expect(await stat(t, '/workspace/keep.txt')).toEqual({ status: 200, mode: '0644' });
    const read = await rpcCall('worker.file_read', { ...t, path: '/workspace/keep.txt' });
    expect(Buffer.from(read.body.result.content, 'base64').toString()).toBe('kept');
  });

  it('snapshot: none made (the same name is free for the current owner)', async () => {
    refused(await rpcCall('worker.snapshot', { ...t, name: 'fenced-snap' }, stale));
    const current = { ...stale, generation: stale.generation + 1 };
    const made = await rpcCall('worker.snapshot', { ...t, name: 'fenced-snap' }, current);
    expect(made.status).toBe(200);
    expect(made.body.result.image).toBe('sbx-snapshot/fenced-snap');
    expect((await rpcCall('worker.snapshot_delete', { provider: 'mock', name: 'fenced-snap', image: made.body.result.image })).status).toBe(
      200,
    );
  });

  it('fork: refused with a stale lease and without one, no fork image made; the current lease forks', async () => {
    const heldForks = () => {
      try {
        return readdirSync(join(dir, 'mock-data', 'forks', worker.installationId));
      } catch {
        return [];
      }
    };
    refused(await rpcCall('worker.fork', { ...t, fork: 'fork-fenced' }, stale));
    expect((await rpcCall('worker.fork', { ...t, fork: 'fork-fenced' })).status).toBe(400);
    expect(heldForks()).toEqual([]);
    const current = { ...stale, generation: stale.generation + 1 };
    const made = await rpcCall('worker.fork', { ...t, fork: 'fork-fenced' }, current);
    expect(made.status).toBe(200);
    expect(made.body.result.image).toBe('sbx-fork/fork-fenced');
    expect(heldForks()).toEqual(['fork-fenced']);
    expect((await rpcCall('worker.fork_delete', { provider: 'mock', fork: 'fork-fenced' })).status).toBe(200);
    expect(heldForks()).toEqual([]);
  });

  it('egress_update and destroy: refused before any other check; the runtime still runs', async () => {
    refused(await rpcCall('worker.egress_update', { ...t, egress: { allow: ['pypi.org'], deny: [] } }, stale));
    refused(await rpcCall('worker.destroy', t, stale));
    expect((await rpcCall('worker.status', t)).body.result.state).toBe('running');
    const ran = await rpcCall('worker.exec', exec(t, 'echo alive'));
    expect(Buffer.from(ran.body.result.stdout, 'base64').toString()).toBe('alive\n');
  });

  it('renew_lease with an older generation: refused, the newest stays', async () => {
    refused(await rpcCall('worker.renew_lease', { resource_id: t.sandbox_id }, stale));
    refused(await rpcCall('worker.file_delete', { ...t, path: '/workspace/keep.txt', recursive: false }, stale));
  });

  it('spawn of a sandbox id the worker saw a newer owner of: 403, no runtime made', async () => {
    const base = { ...stale, resource_id: 'sb-fenced-spawn', generation: 3 };
    await newest(base, 7);
    const params = {
      sandbox_id: 'sb-fenced-spawn',
      provider: 'mock',
      image: 'i',
      memory_mb: 1,
      vcpus: 1,
      ttl: '1m',
      metadata: {},
      owner_id: null,
    };
    const r = await rpcCall('worker.spawn', params, base);
    expect(r.status).toBe(403);
    expect(r.body.error.message).toContain('generation 3 of sb-fenced-spawn is older than generation 7');
    expect((await rpcCall('worker.status', { sandbox_id: 'sb-fenced-spawn', provider: 'mock', runtime_id: 'any' })).body.result.state).toBe(
      'destroyed',
    );
    // A spawn needs a lease at all: 400.
    const bare = await rpcCall('worker.spawn', params);
    expect(bare.status).toBe(400);
    expect(bare.body.error.message).toBe('this method needs a lease');
  });
});

describe('no lease: served where the spec says "lease: no", 400 where a lease is required', () => {
  it('exec, exec_stream, the exec socket and every file call run without one', async () => {
    const { target: t } = await sandbox();
    const ran = await rpcCall('worker.exec', exec(t, 'touch by-exec && echo ok'));
    expect(ran.status).toBe(200);
    expect(Buffer.from(ran.body.result.stdout, 'base64').toString()).toBe('ok\n');
    const streamed = await execStream(t, 'touch by-stream');
    expect(streamed.status).toBe(200);
    expect(streamed.lines.at(-1).result).toMatchObject({ stream: 'exit', exit_code: 0 });
    expect((await execSocket(t, 'touch by-socket')).exit_code).toBe(0);
    for (const f of ['by-exec', 'by-stream', 'by-socket']) expect((await stat(t, `/workspace/${f}`)).status).toBe(200);

    expect((await write(t, '/workspace/a.txt', 'a')).status).toBe(200);
    expect((await rpcCall('worker.file_chmod', { ...t, path: '/workspace/a.txt', mode: 0o600 })).status).toBe(200);
    expect((await rpcCall('worker.file_move', { ...t, old_path: '/workspace/a.txt', new_path: '/workspace/b.txt' })).status).toBe(200);
    expect(await stat(t, '/workspace/b.txt')).toEqual({ status: 200, mode: '0600' });
    expect((await rpcCall('worker.file_delete', { ...t, path: '/workspace/b.txt', recursive: false })).status).toBe(200);
    expect((await stat(t, '/workspace/b.txt')).status).toBe(404);

    const destroy = await rpcCall('worker.destroy', t);
    expect(destroy.status).toBe(400);
    expect((await rpcCall('worker.status', t)).body.result.state).toBe('running');
  });
});

describe('a newer generation: served and recorded', () => {
  it('each call that changes the sandbox moves the newest generation forward; the one before is then stale', async () => {
    const { target: t, lease } = await sandbox();
    let gen = lease.generation;
    const next = () => ({ ...lease, generation: ++gen });
    const prev = () => ({ ...lease, generation: gen - 1 });
    const steps: Array<[string, (l: Lease) => Promise<{ status: number }>]> = [
      ['exec', (l) => rpcCall('worker.exec', exec(t, 'touch n-exec'), l)],
      ['exec_stream', (l) => execStream(t, 'touch n-stream', l)],
      ['exec socket', async (l) => ((await execSocket(t, 'touch n-socket', l)).exit_code === 0 ? { status: 200 } : { status: 500 })],
      ['file_write', (l) => write(t, '/workspace/n.txt', 'n', l)],
      ['file_chmod', (l) => rpcCall('worker.file_chmod', { ...t, path: '/workspace/n.txt', mode: 0o640 }, l)],
      ['file_move', (l) => rpcCall('worker.file_move', { ...t, old_path: '/workspace/n.txt', new_path: '/workspace/m.txt' }, l)],
      ['file_delete', (l) => rpcCall('worker.file_delete', { ...t, path: '/workspace/m.txt', recursive: false }, l)],
    ];
    for (const [name, step] of steps) {
      expect({ name, status: (await step(next())).status }).toEqual({ name, status: 200 });
      // Recorded: the generation just before is now older than the newest.
      const r = await rpcCall('worker.file_write', { ...t, path: '/workspace/late.txt', content: '' }, prev());
      expect({ name, status: r.status }).toEqual({ name, status: 403 });
    }
    for (const f of ['n-exec', 'n-stream', 'n-socket']) expect((await stat(t, `/workspace/${f}`)).status).toBe(200);
    expect((await stat(t, '/workspace/m.txt')).status).toBe(404);
    expect((await stat(t, '/workspace/late.txt')).status).toBe(404);
    // A restarted worker keeps the newest generation it saw.
    await worker.stop();
    worker = await startTestWorker(dir, { id: ID, controlPlane: cp.url, auth: { worker_token: TOKEN } });
    rpc = worker.rpcUrl!;
    expect((await rpcCall('worker.exec', exec(t, 'true'), prev())).status).toBe(403);
    expect((await rpcCall('worker.destroy', t, next())).status).toBe(200);
    expect((await rpcCall('worker.status', t)).body.result.state).toBe('destroyed');
  });
});

describe('a renewal of the same control plane racing its call', () => {
  it('the refused call goes once more with the store’s newer lease (exec, streamed exec, file write, destroy)', async () => {
    const { target: t, lease } = await sandbox();
    const api = `/api/v1/sandboxes/${t.sandbox_id}`;
    // An extend renews the lease in the store and at the worker: generation + 1 on both sides.
    expect((await call(cp.url, 'POST', `${api}/extend`, { ttl: '20m' })).status).toBe(200);
    const store = cp.plane.deps.store;
    const getLease = store.getLease.bind(store);
    let reads = 0;
    // Each call first reads the lease as it was before the extend (the race), then as it is.
    const racing = async (run: () => Promise<{ status: number; body: any }>) => {
      let first = true;
      reads = 0;
      store.getLease = async (id: string) => {
        reads++;
        if (first && id === t.sandbox_id) {
          first = false;
          return { ...lease };
        }
        return getLease(id);
      };
      try {
        return await run();
      } finally {
        store.getLease = getLease;
      }
    };
    const ran = await racing(() => call(cp.url, 'POST', `${api}/exec`, { command: 'echo raced' }));
    expect([ran.status, ran.body.stdout]).toEqual([200, 'raced\n']);
    expect(reads).toBeGreaterThanOrEqual(2);
    const streamed = await racing(() => call(cp.url, 'POST', `${api}/exec`, { command: 'echo s', stream: true }));
    expect(streamed.status).toBe(200);
    const wrote = await racing(() => call(cp.url, 'POST', `${api}/files`, { path: '/workspace/raced.txt', content: 'r' }));
    expect(wrote.status).toBe(200);
    expect((await stat(t, '/workspace/raced.txt')).status).toBe(200);
    const destroyed = await racing(() => call(cp.url, 'DELETE', api));
    expect(destroyed.status).toBe(200);
    expect((await rpcCall('worker.status', t)).body.result.state).toBe('destroyed');
  });
});

describe('a control plane with a stale view', () => {
  it('its exec, file writes, deletes, moves, chmods and process starts are refused; the sandbox is unchanged', async () => {
    const { target: t, lease } = await sandbox();
    const id = t.sandbox_id;
    const api = `/api/v1/sandboxes/${id}`;
    expect((await call(cp.url, 'POST', `${api}/files`, { path: '/workspace/own.txt', content: 'mine' })).status).toBe(200);
    // The control plane sends its lease: served while it is the newest.
    expect((await call(cp.url, 'POST', `${api}/exec`, { command: 'echo fine' })).body.stdout).toBe('fine\n');
    // Another owner now holds a newer generation at the worker.
    await newest(lease, lease.generation + 50);
    const answers = [
      await call(cp.url, 'POST', `${api}/exec`, { command: 'touch cp-exec' }),
      await call(cp.url, 'POST', `${api}/exec`, { command: 'touch cp-stream', stream: true }),
      await call(cp.url, 'POST', `${api}/files`, { path: '/workspace/own.txt', content: 'stolen' }),
      await call(cp.url, 'DELETE', `${api}/files?path=/workspace/own.txt`),
      await call(cp.url, 'POST', `${api}/files/move`, { old_path: '/workspace/own.txt', new_path: '/workspace/gone.txt' }),
      await call(cp.url, 'POST', `${api}/files/chmod`, { path: '/workspace/own.txt', mode: '600' }),
    ];
    for (const a of answers) {
      const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
      expect({ status: a.status, text }).toMatchObject({ status: 403, text: expect.stringContaining('older than generation') });
    }
    // A background process answers at once and runs behind (attached, over the exec socket): the
    // worker refuses its socket, so it ends without having run.
    const proc = await call(cp.url, 'POST', `${api}/processes`, { command: 'touch cp-process; sleep 30' });
    expect(proc.status).toBe(201);
    let state = 'running';
    for (const until = Date.now() + 10_000; state === 'running' && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await call(cp.url, 'GET', `${api}/processes/${proc.body.id}`)).body.state;
    }
    expect(state).toBe('killed');
    for (const f of ['cp-exec', 'cp-stream', 'cp-process', 'gone.txt']) expect((await stat(t, `/workspace/${f}`)).status).toBe(404);
    const read = await rpcCall('worker.file_read', { ...t, path: '/workspace/own.txt' });
    expect(Buffer.from(read.body.result.content, 'base64').toString()).toBe('mine');
    expect((await stat(t, '/workspace/own.txt')).mode).toBe('0644');
  });
});
