import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, SbxError } from '../../src/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ADMIN_KEY = 'z'.repeat(40);
let server: TestServer;
let client: Client;

beforeAll(async () => {
  server = await startTestServer({ auth: { admin_api_key: ADMIN_KEY } });
  client = new Client({ url: `${server.url}/`, adminKey: ADMIN_KEY });
});
afterAll(async () => {
  await client?.close();
  await server?.close();
});

describe('Client (library API)', () => {
  it('normalizes the URL and maps error bodies to SbxError', async () => {
    expect(client.url).toBe(server.url);
    const err = await client.get('sb-missing').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect(err).toMatchObject({ code: 'not_found', details: { status: 404, method: 'GET', path: '/api/v1/sandboxes/sb-missing' } });
    const bad = await client.spawn({ ttl: 'forever' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'bad_request' });
  });

  it('reports an unreachable server as unavailable, naming the URL', async () => {
    const down = new Client({ url: 'http://127.0.0.1:9' });
    const err = await down.health().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect((err as SbxError).code).toBe('unavailable');
    expect((err as SbxError).message).toBe('cannot reach sbx server at http://127.0.0.1:9: connection refused (ECONNREFUSED)');
    await down.close();
  });

  it('sandbox lifecycle, exec (buffered and streamed), logs', async () => {
    const box = await client.spawn({ ttl: '5m', metadata: { a: '1' } });
    expect(box.state).toBe('running');
    expect((await client.list()).map((s) => s.id)).toContain(box.id);
    expect((await client.extend(box.id, '10m')).id).toBe(box.id);
    expect(await client.admission({ ttl: '1m' })).toMatchObject({ allowed: true });

    const buffered = await client.exec(box.id, { command: 'printf', args: ['%s', 'x y'], mode: 'argv' });
    expect(buffered).toMatchObject({ exit_code: 0, stdout: 'x y', stderr: '' });

    const chunks = [];
    for await (const c of client.execStream(box.id, { command: 'echo a; echo b >&2; exit 3', stdin: new Uint8Array([1]) })) chunks.push(c);
    expect(
      chunks
        .filter((c) => c.stream === 'stdout')
        .map((c) => c.data)
        .join(''),
    ).toBe('a\n');
    expect(
      chunks
        .filter((c) => c.stream === 'stderr')
        .map((c) => c.data)
        .join(''),
    ).toBe('b\n');
    expect(chunks.at(-1)).toMatchObject({ stream: 'exit', exit_code: 3 });

    const plain = [];
    for await (const c of client.execStream(box.id, { command: 'echo only', exit_record: false })) plain.push(c);
    expect(plain).toEqual([{ stream: 'stdout', data: 'only\n' }]);

    const timeout = await client.exec(box.id, { command: 'sleep 5', timeout: '1s' }).catch((e: unknown) => e);
    expect(timeout).toMatchObject({ code: 'timeout', details: { status: 408 } });

    expect(await client.logs(box.id, 2)).toEqual(['b', 'only']);
    expect(await client.destroy(box.id)).toEqual({ status: 'destroyed' });
    expect(await client.prune()).toEqual({ pruned: 0 });
  });

  it('all eight file operations; read returns bytes, write is binary-safe', async () => {
    const box = await client.spawn();
    const bytes = new Uint8Array([0, 255, 10, 13, 0x80]);
    expect(await client.files.write(box.id, '/tmp/x/b.bin', bytes, { mode: '600' })).toEqual({ status: 'written' });
    expect(await client.files.write(box.id, '/tmp/x/t.txt', 'héllo')).toEqual({ status: 'written' });
    expect(Buffer.from(await client.files.read(box.id, '/tmp/x/b.bin')).equals(Buffer.from(bytes))).toBe(true);
    expect(Buffer.from(await client.files.read(box.id, '/tmp/x/t.txt')).toString()).toBe('héllo');
    expect((await client.files.list(box.id, '/tmp/x')).map((f) => f.name)).toEqual(['b.bin', 't.txt']);
    expect(await client.files.stat(box.id, '/tmp/x/b.bin')).toMatchObject({ size: 5, mode: '0600', is_dir: false });
    expect(await client.files.chmod(box.id, '/tmp/x/b.bin', '644')).toEqual({ status: 'chmod applied' });
    expect(await client.files.move(box.id, '/tmp/x/t.txt', '/tmp/x/u.txt')).toEqual({ status: 'moved' });
    expect(await client.files.glob(box.id, '/tmp/x/*.txt')).toEqual(['/tmp/x/u.txt']);
    expect(await client.files.remove(box.id, '/tmp/x', { recursive: true })).toEqual({ status: 'deleted' });
    await expect(client.files.stat(box.id, '/tmp/x')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('templates, quotas (admin aliases with an admin key), providers, workers', async () => {
    await client.templates.create({ name: 'lib-t', ttl: '20m' });
    expect((await client.templates.get('lib-t')).ttl).toBe('20m');
    expect((await client.templates.update('lib-t', { ttl: '30m' })).ttl).toBe('30m');
    expect((await client.templates.list()).map((t) => t.name)).toContain('lib-t');
    const fromT = await client.templates.spawn('lib-t', { metadata: { k: 'v' } });
    expect(fromT.metadata.k).toBe('v');
    expect(await client.templates.remove('lib-t')).toEqual({ status: 'deleted' });

    expect(await client.quotas.set('bob', { max_sandboxes: 4 })).toMatchObject({ owner_id: 'bob', max_sandboxes: 4 });
    expect(await client.quotas.get('bob')).toMatchObject({ owner_id: 'bob' });
    expect((await client.quotas.list()).map((q) => q.owner_id)).toEqual(['bob']);
    expect(await client.quotas.usage('bob')).toMatchObject({ quota_configured: true, active_sandboxes: 0 });
    expect(await client.quotas.summary()).toMatchObject({ total: 1, with_max_sandboxes: 1 });
    expect(await client.quotas.remove('bob')).toEqual({ status: 'deleted' });

    expect((await client.providers.list()).map((p) => p.name)).toEqual(['mock']);
    expect(await client.providers.get('mock')).toMatchObject({ name: 'mock', healthy: true });
    expect(await client.providers.test()).toEqual({ mock: true });

    expect((await client.workers.list()).map((w) => w.id)).toContain('local');
    const hb = await client.workers.heartbeat('w-lib', { hostname: 'h1', providers: ['mock'] });
    expect(hb).toMatchObject({ id: 'w-lib', hostname: 'h1' });
    expect((await client.workers.get('w-lib')).hostname).toBe('h1');
    expect(await client.workers.remove('w-lib')).toEqual({ status: 'deleted' });
  });

  it('system, observability and admin audit routes', async () => {
    expect(await client.health()).toMatchObject({ status: 'ok' });
    expect(await client.live()).toMatchObject({ status: 'alive' });
    expect(await client.ready()).toMatchObject({ status: 'ready', ready_providers: 1 });
    expect(await client.snapshots()).toEqual([]);
    // Snapshots and volumes (DESIGN.md §10) through the typed client.
    const src = await client.spawn({ ttl: '5m' });
    await client.files.write(src.id, '/workspace/lib.txt', 'from the client');
    const snap = await client.snapshot(src.id, 'lib-snap');
    expect(snap).toEqual({
      name: 'lib-snap',
      image: 'sbx-snapshot/lib-snap',
      kernel: null,
      size_bytes: expect.any(Number),
      created_at: expect.any(String),
      provider: 'mock',
    });
    expect(snap.size_bytes).toBeGreaterThanOrEqual('from the client'.length);
    expect(await client.snapshots()).toEqual([snap]);
    expect(await client.getSnapshot('lib-snap')).toEqual(snap);
    const vol = await client.volumes.create('lib-vol', { provider: 'mock' });
    expect(vol).toEqual({ name: 'lib-vol', provider: 'mock', size_bytes: 0, created_at: expect.any(String) });
    const child = await client.spawn({ snapshot: 'lib-snap', volumes: [{ name: 'lib-vol', mount_path: '/vol' }] });
    expect(child).toMatchObject({ snapshot: 'lib-snap', volumes: [{ name: 'lib-vol', mount_path: '/vol' }] });
    expect(new TextDecoder().decode(await client.files.read(child.id, '/workspace/lib.txt'))).toBe('from the client');
    await expect(client.volumes.remove('lib-vol')).rejects.toMatchObject({ code: 'conflict' });
    await client.destroy(child.id);
    await client.destroy(src.id);
    expect(await client.volumes.remove('lib-vol')).toEqual({ status: 'deleted' });
    expect(await client.volumes.list()).toEqual([]);
    expect(await client.deleteSnapshot('lib-snap')).toEqual({ status: 'deleted' });
    expect(await client.snapshots()).toEqual([]);
    expect(await client.poolStatus()).toEqual({ enabled: false });
    expect(await client.diagnostics()).toHaveProperty('limits');
    expect(await client.metrics()).toHaveProperty('sandboxes');
    expect(await client.prometheus()).toMatch(/^# (HELP|TYPE) sbx_/m);
    expect(await client.openapi()).toHaveProperty('paths');
    const audit = await client.audit({ limit: 50 });
    expect(audit.some((r) => r.path.startsWith('/api/v1/admin/quotas/bob'))).toBe(true);
    expect(JSON.stringify(audit)).not.toContain(ADMIN_KEY);
    expect(await client.auditCsv({ limit: 5 })).toMatch(/^id,created_at,actor/);
  });

  it('events: async iterator with filters and Last-Event-ID replay', async () => {
    const stop = new AbortController();
    const seen: Array<{ id: number; type: string }> = [];
    const box = await client.spawn();
    const done = (async () => {
      for await (const ev of client.events({ sandboxId: box.id, lastEventId: 0, signal: stop.signal })) {
        seen.push(ev);
        if (ev.type === 'sandbox.destroyed') break;
      }
    })();
    await client.destroy(box.id);
    await done;
    stop.abort();
    expect(seen.map((e) => e.type)).toEqual(['sandbox.created', 'sandbox.running', 'sandbox.destroyed']);
    const after = seen[1]!.id;
    const replay = [];
    for await (const ev of client.events({ sandboxId: box.id, lastEventId: after })) {
      replay.push(ev.type);
      break;
    }
    expect(replay).toEqual(['sandbox.destroyed']);
  });
});
