import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { DOCKER_SKIP, dockerTitle, EngineTap, requireEngine, TEST_IMAGE } from './engine.js';

interface Answer {
  status: number;
  body: Buffer;
  json: any;
}

async function call(base: string, method: string, path: string, body?: unknown, raw?: Buffer): Promise<Answer> {
  const res = await fetch(base + path, {
    method,
    headers: raw ? { 'content-type': 'application/octet-stream' } : body === undefined ? {} : { 'content-type': 'application/json' },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const json = res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(bytes.toString()) : undefined;
  return { status: res.status, body: bytes, json };
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker files through the HTTP API: engine calls and limits'), () => {
  let docker: Docker;
  let dir: string;
  let tap: EngineTap;
  let srv: TestServer;
  let id: string;
  let archive: string;
  const files = (query: string) => `/api/v1/sandboxes/${id}/files${query}`;
  const exec = async (command: string) => (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command })).json;

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-docker-files-'));
    tap = new EngineTap(dir);
    await tap.open();
    srv = await startTestServer({
      // The engine path's calls are counted here; the agent (which makes none) is covered in agent.test.ts.
      providers: { default: 'docker', docker: { socket_path: tap.path, agent: 'off' } },
      defaults: { image: TEST_IMAGE, memory_mb: 64, max_file_mb: 1 },
    });
    const spawned = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(spawned.status).toBe(201);
    id = spawned.json.id;
    archive = `/containers/${(await docker.getContainer(`sbx-${id}`).inspect()).Id}/archive`;
  });
  afterAll(async () => {
    if (srv) {
      for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes')).json ?? [])
        await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
      await srv.close();
    }
    await tap?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a read is one engine call; a write with a mode is one, without a mode two (the old mode is kept)', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    tap.take();
    expect((await call(srv.url, 'POST', files('?path=/workspace/one.bin&mode=640'), undefined, bytes)).status).toBe(200);
    expect(tap.take()).toEqual([`PUT ${archive}`]);
    const read = await call(srv.url, 'GET', files('?path=/workspace/one.bin'));
    expect(read.status).toBe(200);
    expect(read.body.equals(bytes)).toBe(true);
    expect(tap.take()).toEqual([`GET ${archive}`]);

    expect((await call(srv.url, 'POST', files(''), { path: '/workspace/one.bin', content: 'again' })).status).toBe(200);
    expect(tap.take()).toEqual([`HEAD ${archive}`, `PUT ${archive}`]);
    expect((await call(srv.url, 'GET', files('/stat?path=/workspace/one.bin'))).json).toMatchObject({ size: 5, mode: '0640' });
  });

  it('a directory read is a 400 and a read over the file limit a 413, each after one engine call', async () => {
    tap.take();
    const dirRead = await call(srv.url, 'GET', files('?path=/workspace'));
    expect({ status: dirRead.status, body: dirRead.json }).toEqual({
      status: 400,
      body: { code: 'bad_request', message: '/workspace is a directory' },
    });
    expect(tap.take()).toEqual([`GET ${archive}`]);

    // defaults.max_file_mb = 1; the file is made by a command, the API would not take it.
    expect(await exec('head -c 1048577 /dev/zero > /workspace/big; head -c 1048576 /dev/zero > /workspace/at-limit')).toMatchObject({
      exit_code: 0,
    });
    tap.take();
    const big = await call(srv.url, 'GET', files('?path=/workspace/big'));
    expect({ status: big.status, body: big.json }).toEqual({
      status: 413,
      body: { code: 'payload_too_large', message: 'file is 1048577 bytes; the limit is 1048576' },
    });
    expect(tap.take()).toEqual([`GET ${archive}`]);
    const atLimit = await call(srv.url, 'GET', files('?path=/workspace/at-limit'));
    expect(atLimit.status).toBe(200);
    expect(atLimit.body.equals(Buffer.alloc(1048576))).toBe(true);
  });

  it('reads follow links to their target, whose size counts; missing paths stay 404', async () => {
    expect(await exec('ln -s big /workspace/to-big && printf small > /workspace/s && ln -s s /workspace/to-s')).toMatchObject({
      exit_code: 0,
    });
    expect((await call(srv.url, 'GET', files('?path=/workspace/to-s'))).body.toString()).toBe('small');
    expect((await call(srv.url, 'GET', files('?path=/workspace/to-big'))).json).toEqual({
      code: 'payload_too_large',
      message: 'file is 1048577 bytes; the limit is 1048576',
    });
    const missing = await call(srv.url, 'GET', files('?path=/workspace/nope/none'));
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe('not_found');
    // Parents are still created, and bytes stay exact.
    expect((await call(srv.url, 'POST', files(''), { path: '/workspace/p/q/r.txt', content: 'deep' })).status).toBe(200);
    expect((await call(srv.url, 'GET', files('?path=/workspace/p/q/r.txt'))).body.toString()).toBe('deep');
  });

  it('kernel files (/proc, /sys, /dev) are read in the container: contents, limits, missing and directories', async () => {
    const meminfo = await call(srv.url, 'GET', files('?path=/proc/meminfo'));
    expect(meminfo.status).toBe(200);
    expect(meminfo.body.toString()).toMatch(/^MemTotal:\s+\d+ kB$/m);
    expect((await call(srv.url, 'GET', files('?path=/dev/null'))).body.byteLength).toBe(0);
    // Sizes there say 0: an endless file is cut off at the limit (defaults.max_file_mb = 1).
    const zero = await call(srv.url, 'GET', files('?path=/dev/zero'));
    expect({ status: zero.status, body: zero.json }).toEqual({
      status: 413,
      body: { code: 'payload_too_large', message: '/dev/zero is larger than the limit of 1048576 bytes' },
    });
    const missing = await call(srv.url, 'GET', files('?path=/proc/nope'));
    expect({ status: missing.status, code: missing.json.code }).toEqual({ status: 404, code: 'not_found' });
    const dirRead = await call(srv.url, 'GET', files('?path=/proc/self'));
    expect({ status: dirRead.status, code: dirRead.json.code }).toEqual({ status: 400, code: 'bad_request' });
    // Elsewhere a missing path is answered by the archive API alone: no command runs.
    tap.take();
    expect((await call(srv.url, 'GET', files('?path=/workspace/absent'))).status).toBe(404);
    const calls = tap.take();
    expect(calls).toContain(`GET ${archive}`);
    expect(calls.filter((c) => c.startsWith('POST'))).toEqual([]);
  });

  it('large reads stream with a Content-Length; a client hanging up mid-file leaves the server serving', async () => {
    const bytes = Buffer.alloc(1048576);
    for (let i = 0; i < bytes.length; i += 997) bytes[i] = i & 0xff;
    expect((await call(srv.url, 'POST', files('?path=/workspace/stream.bin'), undefined, bytes)).status).toBe(200);
    const { bus } = srv.plane.deps;
    const reads = () => bus.since(0, { types: ['file.read'], sandbox_id: id }).filter((e) => e.data?.path === '/workspace/stream.bin');

    const res = await fetch(srv.url + files('?path=/workspace/stream.bin'));
    expect(res.headers.get('content-length')).toBe('1048576');
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    // Published once the body was sent.
    await waitFor('the file.read event', () => reads().length > 0);
    expect(reads().map((e) => e.data?.size)).toEqual([1048576]);

    const ac = new AbortController();
    const partial = await fetch(srv.url + files('?path=/workspace/stream.bin'), { signal: ac.signal });
    const reader = partial.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    ac.abort();
    const again = await call(srv.url, 'GET', files('?path=/workspace/stream.bin'));
    expect(again.body.equals(bytes)).toBe(true);
  });
});
