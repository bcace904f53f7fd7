import { connect, type Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { waitFor } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openSse, type SseFrame } from '../helpers/sse.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => srv?.close());

const eventsOf = (frames: SseFrame[]) => frames.filter((f) => f.data !== undefined).map((f) => ({ frame: f, event: JSON.parse(f.data!) }));
const kinds = (frames: SseFrame[], sandboxId?: string) =>
  eventsOf(frames)
    .filter((e) => !sandboxId || e.event.sandbox_id === sandboxId)
    .map((e) => e.event.type);
const EVENT_KEY_ORDER = ['id', 'type', 'timestamp', 'sandbox_id', 'owner_id', 'worker_id', 'data'];
const subscribers = async () => (await call(srv.url, 'GET', '/api/v1/diagnostics')).body.events.subscribers as number;

describe('GET /api/v1/events (SSE)', () => {
  it('streams spawn, exec and destroy as ordered frames with id, event and data', async () => {
    const s = await openSse(`${srv.url}/api/v1/events`);
    try {
      expect(s.status).toBe(200);
      expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(s.headers.get('x-request-id')).toBeTruthy();
      const sp = await call(srv.url, 'POST', '/api/v1/sandboxes', { metadata: { t: 'sse' } });
      expect(sp.status).toBe(201);
      const id = sp.body.id as string;
      const ex = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo', args: ['hello'] });
      expect(ex.body.stdout).toBe('hello\n');
      const w = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/a.txt', content: 'x' });
      expect(w.status).toBeLessThan(300);
      expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);

      await s.until((f) => kinds(f, id).includes('sandbox.destroyed'));
      expect(kinds(s.frames, id)).toEqual([
        'sandbox.created',
        'sandbox.running',
        'exec.started',
        'exec.completed',
        'file.written',
        'sandbox.destroyed',
      ]);
      const evs = eventsOf(s.frames).filter((e) => e.event.sandbox_id === id);
      for (const { frame, event } of evs) {
        expect(frame.id).toBe(String(event.id));
        expect(frame.event).toBe(event.type);
        // DESIGN.md §3 order, on the wire: id, type, timestamp, sandbox_id?, owner_id?, worker_id?, data?
        expect(Object.keys(event)).toEqual(EVENT_KEY_ORDER.filter((k) => k in event));
        expect(Object.keys(event).slice(0, 4)).toEqual(['id', 'type', 'timestamp', 'sandbox_id']);
        expect(Date.parse(event.timestamp)).not.toBeNaN();
        expect(event.worker_id).toBe('local');
      }
      const ids = evs.map((e) => e.event.id as number);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
      expect(evs[3]!.event.data).toMatchObject({ program: 'echo', exit_code: 0 });
      expect(evs[5]!.event.data).toMatchObject({ reason: 'requested' });
      // The raw wire format, exactly.
      expect(s.raw()).toContain(`id: ${ids[0]}\nevent: sandbox.created\ndata: {"id":${ids[0]},"type":"sandbox.created","timestamp":"`);
    } finally {
      s.close();
    }
  });

  it('streams quota.saved and quota.deleted in order between spawn, exec and destroy', async () => {
    const owner = 'sse-quota-order';
    const mine = (frames: SseFrame[]) => eventsOf(frames).filter((e) => e.event.owner_id === owner);
    const s = await openSse(`${srv.url}/api/v1/events?types=sandbox.created,sandbox.destroyed,exec.completed,quota.*`);
    try {
      expect((await call(srv.url, 'PUT', `/api/v1/quotas/${owner}`, { max_sandboxes: 2, max_ttl: '1h' })).status).toBe(200);
      const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': owner })).body.id as string;
      expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' }, { 'X-User-ID': owner })).status).toBe(200);
      expect((await call(srv.url, 'PUT', `/api/v1/quotas/${owner}`, { max_sandboxes: 5 })).status).toBe(200);
      expect((await call(srv.url, 'DELETE', `/api/v1/quotas/${owner}`)).status).toBe(200);
      expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, { 'X-User-ID': owner })).status).toBe(200);
      // The admin alias emits the same kinds on the same stream.
      expect((await call(srv.url, 'PUT', `/api/v1/admin/quotas/${owner}`, { max_sandboxes: 1 })).status).toBe(200);
      expect((await call(srv.url, 'DELETE', `/api/v1/admin/quotas/${owner}`)).status).toBe(200);

      await s.until((f) => mine(f).filter((e) => e.event.type === 'quota.deleted').length >= 2);
      const evs = mine(s.frames);
      expect(evs.map((e) => e.event.type)).toEqual([
        'quota.saved',
        'sandbox.created',
        'exec.completed',
        'quota.saved',
        'quota.deleted',
        'sandbox.destroyed',
        'quota.saved',
        'quota.deleted',
      ]);
      const ids = evs.map((e) => e.event.id as number);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
      for (const { frame, event } of evs) {
        expect(frame.id).toBe(String(event.id));
        expect(frame.event).toBe(event.type);
        expect(Object.keys(event)).toEqual(EVENT_KEY_ORDER.filter((k) => k in event));
      }
      expect(evs[0]!.event.data).toMatchObject({ owner, max_sandboxes: 2 });
      expect(evs[3]!.event.data).toMatchObject({ owner, max_sandboxes: 5 });
      expect(evs[4]!.event).toMatchObject({ type: 'quota.deleted', owner_id: owner, data: { owner } });
      expect(evs[4]!.event.sandbox_id).toBeUndefined();
    } finally {
      s.close();
    }
  });

  it('replays from Last-Event-ID (header or query) after a reconnect and loses nothing', async () => {
    const first = await openSse(`${srv.url}/api/v1/events?types=sandbox.*`);
    const a = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    await first.until((f) => kinds(f, a).includes('sandbox.running'));
    const lastSeen = eventsOf(first.frames).at(-1)!.event.id as number;
    first.close();

    // While nobody listens: more lifecycle.
    const b = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${a}`);

    const again = await openSse(`${srv.url}/api/v1/events?types=sandbox.*`, { 'Last-Event-ID': String(lastSeen) });
    try {
      await again.until((f) => kinds(f, a).includes('sandbox.destroyed'));
      const replayed = eventsOf(again.frames).map((e) => e.event);
      expect(replayed.map((e) => `${e.type}:${e.sandbox_id}`)).toEqual([
        `sandbox.created:${b}`,
        `sandbox.running:${b}`,
        `sandbox.destroyed:${a}`,
      ]);
      expect(replayed.every((e) => e.id > lastSeen)).toBe(true);
      // Live events follow the replay on the same connection.
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${b}`);
      await again.until((f) => kinds(f, b).includes('sandbox.destroyed'));
    } finally {
      again.close();
    }

    const viaQuery = await openSse(`${srv.url}/api/v1/events?types=sandbox.destroyed&last_event_id=${lastSeen}`);
    try {
      await viaQuery.until((f) => kinds(f).length >= 2);
      expect(eventsOf(viaQuery.frames).map((e) => e.event.sandbox_id)).toEqual([a, b]);
    } finally {
      viaQuery.close();
    }
  });

  it('filters by types (kinds and group wildcards) and sandbox_id; rejects unknown kinds', async () => {
    const a = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const b = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const onlyExec = await openSse(`${srv.url}/api/v1/events?types=exec.*,sandbox.destroyed&sandbox_id=${a}`);
    try {
      await call(srv.url, 'POST', `/api/v1/sandboxes/${b}/exec`, { command: 'true' });
      await call(srv.url, 'POST', `/api/v1/sandboxes/${a}/exec`, { command: 'exit 3' });
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${b}`);
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${a}`);
      await onlyExec.until((f) => kinds(f).includes('sandbox.destroyed'));
      expect(kinds(onlyExec.frames)).toEqual(['exec.started', 'exec.completed', 'sandbox.destroyed']);
      expect(eventsOf(onlyExec.frames).every((e) => e.event.sandbox_id === a)).toBe(true);
      expect(eventsOf(onlyExec.frames)[1]!.event.data.exit_code).toBe(3);
    } finally {
      onlyExec.close();
    }
    const bad = await call(srv.url, 'GET', '/api/v1/events?types=sandbox.nope');
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad_request');
    expect(bad.body.message).toContain('sandbox.nope');
    expect((await call(srv.url, 'GET', '/api/v1/events', undefined, { 'Last-Event-ID': 'abc' })).status).toBe(400);
  });

  it('sends comment keep-alives on the configured interval and unsubscribes on disconnect', async () => {
    const before = await subscribers();
    srv.plane.deps.eventStream = { keepAliveMs: 40 };
    const s = await openSse(`${srv.url}/api/v1/events?types=quota.saved`);
    try {
      await s.until((f) => f.filter((x) => x.comments.includes('keep-alive')).length >= 2, 3000);
      expect(s.raw()).toContain('\n: keep-alive\n\n');
      expect(await subscribers()).toBe(before + 1);
    } finally {
      s.close();
      srv.plane.deps.eventStream = undefined;
    }
    await waitFor('the subscribers back', async () => (await subscribers()) === before, 5_000, 20);
  });

  it('drops a stalled client with a final comment and never delays spawns or other subscribers', async () => {
    srv.plane.deps.eventStream = { maxBufferedEvents: 200, maxBufferedBytes: 2 * 1024 * 1024 };
    const before = await subscribers();
    const healthy = await openSse(`${srv.url}/api/v1/events?types=image.pull`);
    const { port } = new URL(srv.url);
    const stalled: Socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((r) => stalled.once('connect', () => r()));
    stalled.pause(); // never reads a byte
    stalled.write(`GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`);
    try {
      await waitFor('two more subscribers', async () => (await subscribers()) === before + 2, 5_000, 20);

      // Flood the bus: far more than the socket buffers can take for a reader that never reads.
      const blob = 'x'.repeat(8 * 1024);
      let published = 0;
      while ((await subscribers()) > before + 1 && published < 5000) {
        for (let i = 0; i < 10; i++) srv.plane.deps.bus.publish({ type: 'image.pull', data: { image: 'flood', progress: blob } });
        published += 10;
        await new Promise((r) => setTimeout(r, 2));
      }
      expect(await subscribers()).toBe(before + 1); // the stalled one is gone, the healthy one stays

      // The server is not held up: a spawn answers promptly.
      const t0 = Date.now();
      const sp = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(sp.status).toBe(201);
      expect(Date.now() - t0).toBeLessThan(2000);

      // The healthy subscriber got every flood event, in order.
      await healthy.until((f) => eventsOf(f).length >= published, 20_000);
      const got = eventsOf(healthy.frames).map((e) => e.event.id as number);
      expect(got).toHaveLength(published);
      for (let i = 1; i < got.length; i++) expect(got[i]).toBe(got[i - 1]! + 1);
    } finally {
      healthy.close();
      stalled.destroy();
      srv.plane.deps.eventStream = undefined;
    }
  }, 60_000);

  it('ends a dropped stream with ": dropped: too slow"', async () => {
    // A client that reads, but only after the server has given up on it.
    srv.plane.deps.eventStream = { maxBufferedEvents: 5, maxBufferedBytes: 64 * 1024 };
    const { port } = new URL(srv.url);
    const sock = connect(Number(port), '127.0.0.1');
    await new Promise<void>((r) => sock.once('connect', () => r()));
    sock.pause();
    const before = await subscribers();
    sock.write(`GET /api/v1/events?types=image.pull HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    try {
      await waitFor('one more subscriber', async () => (await subscribers()) === before + 1, 5_000, 20);
      const blob = 'y'.repeat(64 * 1024);
      for (let i = 0; i < 2000 && (await subscribers()) > before; i += 10) {
        for (let j = 0; j < 10; j++) srv.plane.deps.bus.publish({ type: 'image.pull', data: { image: 'drop', progress: blob } });
        await new Promise((r) => setImmediate(r));
      }
      expect(await subscribers()).toBe(before);
      let text = '';
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => (text += d));
      sock.resume();
      await new Promise<void>((r) => sock.once('close', () => r()));
      expect(text).toMatch(/^HTTP\/1\.1 200/);
      expect(text).toContain(': dropped: too slow\n\n');
      // It is the last thing on the wire: nothing after it but the end of the chunked body.
      expect(text.lastIndexOf(': dropped: too slow')).toBeGreaterThan(text.lastIndexOf('event: image.pull'));
    } finally {
      sock.destroy();
      srv.plane.deps.eventStream = undefined;
    }
  }, 60_000);

  it('moves a sandbox whose runtime vanished to error and emits sandbox.error once', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const s = await openSse(`${srv.url}/api/v1/events?sandbox_id=${id}`);
    try {
      // Something outside sbx removes the runtime (the mock provider keeps one directory per sandbox).
      rmSync(join(srv.dir, 'mock', id), { recursive: true, force: true });
      const r = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/x', content: 'x' });
      expect(r.status).toBeGreaterThanOrEqual(400);
      await s.until((f) => kinds(f).includes('sandbox.error'));
      expect(kinds(s.frames)).toEqual(expect.arrayContaining(['sandbox.error']));
      const err = eventsOf(s.frames).find((e) => e.event.type === 'sandbox.error')!.event;
      expect(err.data).toMatchObject({ provider: 'mock', operation: 'write_file', reason: 'runtime missing' });
      const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`);
      expect(got.body.state).toBe('error');
      // Further operations say why instead of failing obscurely; destroy still works.
      const ex = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' });
      expect(ex.status).toBe(503);
      expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
      await s.until((f) => kinds(f).includes('sandbox.destroyed'));
      expect(kinds(s.frames).filter((k) => k === 'sandbox.error')).toHaveLength(1);
    } finally {
      s.close();
    }
  });

  it('reports an exec on a vanished runtime as sandbox.error, exec.failed and operation.failed', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const s = await openSse(`${srv.url}/api/v1/events?sandbox_id=${id}`);
    try {
      rmSync(join(srv.dir, 'mock', id), { recursive: true, force: true });
      const ex = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' });
      expect(ex.status).toBeGreaterThanOrEqual(400);
      await s.until((f) => kinds(f).includes('sandbox.error') && kinds(f).includes('operation.failed'));
      // A vanished runtime is the sandbox's failure, not the provider's: no provider.failed here.
      expect(kinds(s.frames)).toEqual(['exec.started', 'sandbox.error', 'exec.failed', 'operation.failed']);
      const op = eventsOf(s.frames).find((e) => e.event.type === 'operation.failed')!.event;
      expect(op.data).toMatchObject({ operation: 'exec', provider: 'mock' });
    } finally {
      s.close();
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    }
  });
});

describe('resource.limit from exec and extend', () => {
  it('publishes resource.limit when an exec timeout or an extension passes the maximum', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'limited' })).body.id as string;
    const s = await openSse(`${srv.url}/api/v1/events?types=resource.limit`);
    try {
      expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true', timeout: '1h' })).status).toBe(429);
      expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/extend`, { ttl: '48h' })).status).toBe(429);
      await s.until((f) => eventsOf(f).length >= 2);
      const [ex, ext] = eventsOf(s.frames).map((e) => e.event);
      expect(ex).toMatchObject({
        type: 'resource.limit',
        sandbox_id: id,
        owner_id: 'limited',
        data: { reason: 'max_exec_timeout', operation: 'exec', requested: '1h', max: '10m0s' },
      });
      expect(ext).toMatchObject({
        type: 'resource.limit',
        sandbox_id: id,
        owner_id: 'limited',
        data: { reason: 'max_ttl', operation: 'extend', requested: '48h' },
      });
    } finally {
      s.close();
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    }
  });
});

describe('event visibility with ownership enforced', () => {
  let own: TestServer;
  beforeAll(async () => {
    own = await startTestServer({ auth: { enforce_ownership: true, admin_api_key: 'admin-key-for-events-test-0123456789' } });
  });
  afterAll(async () => own?.close());

  it('shows a non-admin its own and unowned events only; an admin sees all', async () => {
    const alice = await openSse(`${own.url}/api/v1/events?types=sandbox.created`, { 'X-User-ID': 'alice' });
    const admin = await openSse(`${own.url}/api/v1/events?types=sandbox.created`, {
      'X-Admin-API-Key': 'admin-key-for-events-test-0123456789',
    });
    try {
      const a = (await call(own.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).body.id;
      const b = (await call(own.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'bob' })).body.id;
      const n = (await call(own.url, 'POST', '/api/v1/sandboxes', {})).body.id;
      await admin.until((f) => eventsOf(f).length >= 3);
      await alice.until((f) => eventsOf(f).some((e) => e.event.sandbox_id === n));
      expect(eventsOf(admin.frames).map((e) => e.event.sandbox_id)).toEqual([a, b, n]);
      expect(eventsOf(alice.frames).map((e) => e.event.sandbox_id)).toEqual([a, n]);
      expect(eventsOf(alice.frames)[0]!.event.owner_id).toBe('alice');
    } finally {
      alice.close();
      admin.close();
    }
  });
});
