/**
 * The HTTP API in the unit tier: the whole app of `sbx serve` through `app.inject`, over the
 * in-memory provider, SQLite in memory and fake timers — TTLs, exec deadlines and the reaper move
 * only when the test moves the clock. Lifecycle, exec (buffered, NDJSON, deadline), files, logs,
 * processes, snapshots, volumes, events and the JSON errors.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { advanceUntil, fakeClock, startUnitPlane, type UnitPlane } from '../../helpers/unit-plane.js';

let u: UnitPlane;
const T0 = Date.UTC(2030, 0, 1);
beforeAll(async () => {
  fakeClock(T0);
  u = await startUnitPlane({ defaults: { max_ttl: '2h', max_exec_timeout: '1m', max_file_mb: 1 } });
});
afterAll(async () => {
  await u?.close();
  vi.useRealTimers();
});

const spawn = async (body: unknown = {}) => {
  const res = await u.req('POST', '/api/v1/sandboxes', body);
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; expires_at: string; created_at: string; state: string; metadata: Record<string, string> };
};
const exec = (id: string, body: Record<string, unknown>) => u.req('POST', `/api/v1/sandboxes/${id}/exec`, body);
const api = (id: string) => `/api/v1/sandboxes/${id}`;

describe('sandboxes', () => {
  it('a spawn without a body takes the defaults: running, 30 min TTL on the fake clock', async () => {
    const s = await spawn(undefined);
    expect(s.state).toBe('running');
    expect(Date.parse(s.expires_at) - Date.parse(s.created_at)).toBe(30 * 60_000);
    expect((await u.req('GET', api(s.id))).body).toMatchObject({ id: s.id, provider: 'memory', state: 'running' });
  });

  it('keeps metadata and a TTL; a TTL over the maximum is 429, a bad one 400', async () => {
    const s = await spawn({ ttl: '10m', metadata: { team: 'a' } });
    expect(s.metadata).toEqual({ team: 'a' });
    expect(Date.parse(s.expires_at) - Date.parse(s.created_at)).toBe(10 * 60_000);
    expect((await u.req('POST', '/api/v1/sandboxes', { ttl: '3h' })).body.code).toBe('resource_limit');
    const bad = await u.req('POST', '/api/v1/sandboxes', { ttl: 'soon' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad_request');
    expect((await u.req('POST', '/api/v1/sandboxes', { nonsense: 1 })).status).toBe(400);
  });

  it('extend moves expires_at from now', async () => {
    const s = await spawn({ ttl: '5m' });
    await vi.advanceTimersByTimeAsync(60_000);
    const ext = await u.req('POST', `${api(s.id)}/extend`, { ttl: '20m' });
    expect(ext.status).toBe(200);
    expect(Date.parse(ext.body.expires_at)).toBe(Date.now() + 20 * 60_000);
  });

  it('past its TTL a sandbox is gone at once for every operation; destroy still answers destroyed', async () => {
    const s = await spawn({ ttl: '1m' });
    expect((await exec(s.id, { command: 'echo alive' })).body.stdout).toBe('alive\n');
    await vi.advanceTimersByTimeAsync(61_000);
    expect((await u.req('GET', api(s.id))).status).toBe(404);
    expect((await exec(s.id, { command: 'echo late' })).status).toBe(404);
    expect((await u.req('GET', `${api(s.id)}/files/list?path=/`)).status).toBe(404);
    expect((await u.req('DELETE', api(s.id))).body).toEqual({ status: 'destroyed' });
  });

  it('the reaper tears down expired runtimes when its interval comes', async () => {
    const s = await spawn({ ttl: '1m' });
    const runtime = (await u.plane.deps.store.getSandbox(s.id))!.runtime_id!;
    expect(await u.provider.status(runtime)).toBe('running');
    await vi.advanceTimersByTimeAsync(61_000 + 10_000);
    for (let i = 0; i < 50 && (await u.provider.status(runtime)) !== 'missing'; i++) await vi.advanceTimersByTimeAsync(1_000);
    expect(await u.provider.status(runtime)).toBe('missing');
  });

  it('destroy is idempotent and leaves nothing running', async () => {
    const s = await spawn();
    expect((await u.req('DELETE', api(s.id))).body).toEqual({ status: 'destroyed' });
    expect((await u.req('DELETE', api(s.id))).body).toEqual({ status: 'destroyed' });
    expect((await u.req('GET', api(s.id))).status).toBe(404);
    expect((await u.req('GET', '/api/v1/sandboxes')).text).not.toContain(s.id);
  });

  it.each([
    ['GET', '/api/v1/sandboxes/sb-nope', 404, 'not_found'],
    ['GET', '/api/v1/no-such-route', 404, 'not_found'],
    ['PATCH', '/api/v1/sandboxes', 405, 'method_not_allowed'],
    ['POST', '/api/v1/sandboxes/sb-nope/exec', 404, 'not_found'],
  ])('%s %s answers %i with a JSON error', async (method, url, status, code) => {
    const res = await u.req(method, url, method === 'POST' ? { command: 'true' } : undefined);
    expect(res.status).toBe(status);
    expect(Object.keys(res.body).sort()).toEqual(['code', 'message']);
    expect(res.body.code).toBe(code);
  });

  it.each(['/api/v1/live', '/api/v1/ready', '/api/v1/health'])('%s answers 200', async (url) => {
    expect((await u.req('GET', url)).status).toBe(200);
  });
});

describe('exec', () => {
  let id: string;
  beforeAll(async () => {
    id = (await spawn({ ttl: '2h' })).id;
  });

  it('buffered: stdout, stderr and the exit code', async () => {
    expect((await exec(id, { command: 'echo out; echo err >&2; exit 3' })).body).toMatchObject({
      exit_code: 3,
      stdout: 'out\n',
      stderr: 'err\n',
    });
  });

  it('argv mode passes arguments verbatim; shell mode quotes them', async () => {
    const args = ['a b', '$HOME', "it's"];
    expect((await exec(id, { command: 'printf', args: ['%s|', ...args], mode: 'argv' })).body.stdout).toBe("a b|$HOME|it's|");
    expect((await exec(id, { command: 'printf "%s|"', args })).body.stdout).toBe("a b|$HOME|it's|");
  });

  it('env and workdir reach the command', async () => {
    await u.req('POST', `${api(id)}/files`, { path: '/workspace/sub/x', content: '' });
    const res = await exec(id, { command: 'echo "$GREETING"; pwd', env: { GREETING: 'hello' }, workdir: '/workspace/sub' });
    expect(res.body.stdout).toBe('hello\n/workspace/sub\n');
  });

  it('a missing command is 127 with the exact message', async () => {
    expect((await exec(id, { command: 'sbx-no-such', mode: 'argv' })).body).toMatchObject({
      exit_code: 127,
      stderr: 'sbx: command not found: sbx-no-such\n',
    });
  });

  it('NDJSON stream: chunks, and the exit record when asked', async () => {
    const res = await exec(id, { command: 'echo a; echo b >&2', stream: true, exit_record: true });
    expect(res.status).toBe(200);
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stream: string; data: string; exit_code?: number });
    expect(
      lines
        .filter((l) => l.stream === 'stdout')
        .map((l) => l.data)
        .join(''),
    ).toBe('a\n');
    expect(
      lines
        .filter((l) => l.stream === 'stderr')
        .map((l) => l.data)
        .join(''),
    ).toBe('b\n');
    expect(lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 0 });
    const plain = await exec(id, { command: 'echo a', stream: true });
    expect(
      plain.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).stream),
    ).toEqual(['stdout']);
  });

  it('a deadline ends a buffered exec with 408, its output so far and a killed command', async () => {
    const res = await advanceUntil(exec(id, { command: 'echo before; sleep 30; echo after > /workspace/late', timeout: '2s' }), 5_000);
    expect(res.status).toBe(408);
    expect(res.body).toMatchObject({ code: 'timeout', stdout: 'before\n' });
    await vi.advanceTimersByTimeAsync(40_000);
    expect((await u.req('GET', `${api(id)}/files/stat?path=/workspace/late`)).status).toBe(404);
  });

  it('a streamed deadline ends with exit 124 and a stderr chunk naming it', async () => {
    const res = await advanceUntil(exec(id, { command: 'sleep 30', timeout: '1s', stream: true, exit_record: true }), 5_000);
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 124 });
    expect(lines.some((l: { stream: string; data: string }) => l.stream === 'stderr' && /time/i.test(l.data))).toBe(true);
  });

  it('a timeout above the maximum is refused before anything runs', async () => {
    const res = await exec(id, { command: 'echo ran > /workspace/ran', timeout: '5m' });
    expect(res.status).toBe(429);
    expect((await u.req('GET', `${api(id)}/files/stat?path=/workspace/ran`)).status).toBe(404);
  });

  it('console logs hold the exec output lines', async () => {
    const s = await spawn();
    await exec(s.id, { command: 'echo l1; echo l2; echo l3' });
    expect((await u.req('GET', `${api(s.id)}/logs`)).body).toEqual(['l1', 'l2', 'l3']);
    expect((await u.req('GET', `${api(s.id)}/logs?lines=1`)).body).toEqual(['l3']);
  });
});

describe('files', () => {
  let id: string;
  const f = (path: string) => `${api(id)}/files${path}`;
  beforeAll(async () => {
    id = (await spawn({ ttl: '2h' })).id;
  });

  it('writes text and base64, reads raw bytes back, applies the mode', async () => {
    expect((await u.req('POST', f(''), { path: '/workspace/t.txt', content: 'text\n', mode: '0640' })).status).toBe(200);
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await u.req('POST', f(''), { path: '/workspace/b.bin', content: bytes.toString('base64'), encoding: 'base64' });
    expect((await u.req('GET', f('?path=/workspace/t.txt'))).text).toBe('text\n');
    const raw = await u.inject({ method: 'GET', url: f('?path=/workspace/b.bin') });
    expect(raw.headers['content-type']).toContain('application/octet-stream');
    expect(raw.rawPayload.equals(bytes)).toBe(true);
    expect((await u.req('GET', f('/stat?path=/workspace/t.txt'))).body).toMatchObject({
      name: 't.txt',
      size: 5,
      mode: '0640',
      is_dir: false,
    });
  });

  it('a raw upload writes the body as it is', async () => {
    const res = await u.req('POST', f('?path=/workspace/raw.bin&mode=600'), 'raw\u0000bytes', {
      'content-type': 'application/octet-stream',
    });
    expect(res.status).toBe(200);
    expect((await u.req('GET', f('?path=/workspace/raw.bin'))).text).toBe('raw\u0000bytes');
    expect((await u.req('GET', f('/stat?path=/workspace/raw.bin'))).body.mode).toBe('0600');
  });

  it('lists sorted, moves, chmods, globs and deletes', async () => {
    for (const n of ['c.txt', 'a.txt', 'b.md']) await u.req('POST', f(''), { path: `/workspace/l/${n}`, content: n });
    expect(((await u.req('GET', f('/list?path=/workspace/l'))).body as Array<{ name: string }>).map((x) => x.name)).toEqual([
      'a.txt',
      'b.md',
      'c.txt',
    ]);
    expect((await u.req('POST', f('/move'), { old_path: '/workspace/l/a.txt', new_path: '/workspace/l/z.txt' })).status).toBe(200);
    expect((await u.req('POST', f('/chmod'), { path: '/workspace/l/z.txt', mode: '0755' })).status).toBe(200);
    expect((await u.req('GET', f('/stat?path=/workspace/l/z.txt'))).body.mode).toBe('0755');
    expect((await u.req('GET', f('/glob?pattern=/workspace/l/*.txt'))).body).toMatchObject(
      expect.arrayContaining(['/workspace/l/c.txt', '/workspace/l/z.txt']),
    );
    expect((await u.req('DELETE', f('?path=/workspace/l'))).status).toBe(400);
    expect((await u.req('DELETE', f('?path=/workspace/l&recursive=true'))).status).toBe(200);
    expect((await u.req('GET', f('/stat?path=/workspace/l'))).status).toBe(404);
  });

  it.each([
    ['GET', '?path=relative.txt', 400],
    ['GET', '?path=/workspace/a%00b', 400],
    ['GET', '?path=/workspace/../etc/passwd', 404],
    ['GET', '?path=/workspace/missing', 404],
    ['GET', '/stat?path=/workspace/missing', 404],
    ['GET', '/list?path=/workspace/missing', 404],
    ['DELETE', '?path=/workspace/missing', 404],
  ])('%s files%s answers %i', async (method, q, status) => {
    const res = await u.req(method, f(q));
    expect(res.status).toBe(status);
    expect(res.body.code).toBe(status === 404 ? 'not_found' : 'bad_request');
  });

  it('a file over the size limit is 413 on write and read', async () => {
    const big = Buffer.alloc(1024 * 1024 + 1, 0x61).toString();
    expect((await u.req('POST', f(''), { path: '/workspace/big', content: big })).status).toBe(413);
    await exec(id, { command: 'head -c 1048577 /dev/zero > /workspace/big2' });
    expect((await u.req('GET', f('?path=/workspace/big2'))).status).toBe(413);
  });
});

describe('processes, snapshots, volumes, events', () => {
  it('a background process runs, shows its output, and is killed on request', async () => {
    const s = await spawn();
    const started = await u.req('POST', `${api(s.id)}/processes`, { command: 'echo started; sleep 1000' });
    expect(started.status).toBe(201);
    const pid = started.body.id as string;
    expect(((await u.req('GET', `${api(s.id)}/processes`)).body as Array<{ id: string }>).map((p) => p.id)).toEqual([pid]);
    let out = '';
    for (let i = 0; i < 50 && !out.includes('started'); i++) {
      out = (await u.req('GET', `${api(s.id)}/processes/${pid}/output`)).text;
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(out).toContain('started');
    expect((await u.req('POST', `${api(s.id)}/processes/${pid}/signal`, { signal: 'SIGTERM' })).status).toBeLessThan(300);
    let state = 'running';
    for (let i = 0; i < 50 && state === 'running'; i++) {
      state = (await u.req('GET', `${api(s.id)}/processes/${pid}`)).body.state;
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(state).not.toBe('running');
  });

  it('a snapshot carries the files into a new sandbox', async () => {
    const s = await spawn();
    await u.req('POST', `${api(s.id)}/files`, { path: '/workspace/kept.txt', content: 'kept' });
    expect((await u.req('POST', `${api(s.id)}/snapshot`, { name: 'snap-one' })).status).toBe(201);
    expect((await u.req('POST', `${api(s.id)}/snapshot`, { name: 'snap-one' })).status).toBe(409);
    const copy = await spawn({ snapshot: 'snap-one' });
    expect((await u.req('GET', `${api(copy.id)}/files?path=/workspace/kept.txt`)).text).toBe('kept');
    expect(((await u.req('GET', '/api/v1/snapshots')).body as Array<{ name: string }>).map((x) => x.name)).toContain('snap-one');
    expect((await u.req('DELETE', '/api/v1/snapshots/snap-one')).status).toBe(200);
    expect((await u.req('GET', '/api/v1/snapshots/snap-one')).status).toBe(404);
  });

  it('a volume is shared by the sandboxes that mount it and cannot go while mounted', async () => {
    expect((await u.req('POST', '/api/v1/volumes', { name: 'shared-vol' })).status).toBe(201);
    const a = await spawn({ volumes: [{ name: 'shared-vol', mount_path: '/data' }] });
    const b = await spawn({ volumes: [{ name: 'shared-vol', mount_path: '/mnt/v' }] });
    await exec(a.id, { command: 'echo from-a > /data/note' });
    expect((await exec(b.id, { command: 'cat /mnt/v/note' })).body.stdout).toBe('from-a\n');
    expect((await u.req('DELETE', '/api/v1/volumes/shared-vol')).status).toBe(409);
    await u.req('DELETE', api(a.id));
    await u.req('DELETE', api(b.id));
    expect((await u.req('DELETE', '/api/v1/volumes/shared-vol')).status).toBe(200);
  });

  it('the event stream replays a sandbox’s events, filtered by sandbox_id', async () => {
    const s = await spawn();
    const res = await u.inject({
      method: 'GET',
      url: `/api/v1/events?sandbox_id=${s.id}`,
      headers: { 'last-event-id': '0' },
      payloadAsStream: true,
    });
    expect(res.headers['content-type']).toContain('text/event-stream');
    const stream = res.stream();
    let text = '';
    stream.on('data', (c: Buffer) => (text += c.toString()));
    for (let i = 0; i < 20 && !text.includes('sandbox.running'); i++) await new Promise((r) => setImmediate(r));
    stream.destroy();
    expect(text).toContain('event: sandbox.created');
    expect(text).toContain(s.id);
    expect(text.match(/"sandbox_id":"([^"]+)"/g)?.every((m) => m.includes(s.id))).toBe(true);
  });
});
