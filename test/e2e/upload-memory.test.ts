/**
 * Memory of JSON file uploads (issue 30 item 9): eight concurrent 63 MB `POST …/files` bodies
 * `{path, content (base64), encoding: "base64"}` against a real `sbx serve` process on mock all
 * succeed byte-exact (sha256 of each file read back), in three member orders — path and encoding
 * before content (decoded straight into the sandbox), encoding after content (decoded on the guess,
 * the raw text spooled beside), path after content (spooled, then written) — and the server's
 * peak RSS (VmHWM of /proc/PID/status) stays ≤ 600 MB, falling to ≤ 300 MB afterwards. A body
 * that turns malformed mid-stream is a 400 that leaves no file, partial or temporary, and no spool.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt } from './build.js';

/** Decoded size of each upload: its base64 JSON body is about 63 MB (under the 64 MiB body limit). */
const FILE_BYTES = 47 * 1024 * 1024;
const UPLOADS = 8;
const MiB = 1024 * 1024;

let home: string;
let spoolTmp: string;
let child: ChildProcess;
let url: string;
let sandbox: string;

async function startServe(): Promise<void> {
  child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: home,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      // The server's spools go here, so the test can see that none is left.
      TMPDIR: spoolTmp,
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(home, 'mock'),
      SVC_LOGGING_FORMAT: 'json',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) {
      url = m[1]!;
      return;
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`sbx serve did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** kB figures of the server process: peak (VmHWM) and now (VmRSS). */
function memory(): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
  return { peakMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 };
}

type Order = 'path-first' | 'encoding-after' | 'path-after';

/**
 * POSTs one upload of `size` random bytes as a JSON body in the given member order, generated and
 * hashed piece by piece while it is sent (the test process holds no whole body either). `poison`
 * makes the content turn into garbage after that many bytes. Resolves with the answer and the sha256.
 */
function upload(
  path: string,
  size: number,
  order: Order,
  poison?: number,
): Promise<{ status: number; body: { code?: string; status?: string }; sha256: string }> {
  const b64Len = 4 * Math.ceil(size / 3);
  const pathMember = `"path":${JSON.stringify(path)}`;
  const head =
    order === 'path-first'
      ? `{${pathMember},"encoding":"base64","content":"`
      : order === 'encoding-after'
        ? `{${pathMember},"content":"`
        : `{"content":"`;
  const tail =
    order === 'path-first' ? '"}' : order === 'encoding-after' ? '","encoding":"base64"}' : `","encoding":"base64",${pathMember}}`;
  const total = Buffer.byteLength(head) + b64Len + Buffer.byteLength(tail);
  const hash = createHash('sha256');
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port,
        method: 'POST',
        path: `/api/v1/sandboxes/${sandbox}/files`,
        headers: { 'content-type': 'application/json', 'content-length': total },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), sha256: hash.digest('hex') }));
      },
    );
    req.on('error', reject);
    const piece = 3 * 64 * 1024; // a multiple of 3: each piece's base64 joins the next exactly
    let sent = 0;
    const pump = () => {
      if (sent === 0) req.write(head);
      while (sent < size) {
        const n = Math.min(piece, size - sent);
        const bytes = randomBytes(n);
        hash.update(bytes);
        let text = bytes.toString('base64');
        if (poison !== undefined && sent + n > poison) text = `${text.slice(0, 10)}!${text.slice(11)}`;
        sent += n;
        if (!req.write(text)) return void req.once('drain', pump);
      }
      req.end(tail);
    };
    pump();
  });
}

async function sha256Of(path: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/sandboxes/${sandbox}/files?path=${encodeURIComponent(path)}`);
  expect(res.status).toBe(200);
  const hash = createHash('sha256');
  for await (const chunk of res.body!) hash.update(chunk);
  return hash.digest('hex');
}

async function workspace(): Promise<string[]> {
  const res = await fetch(`${url}/api/v1/sandboxes/${sandbox}/files/list?path=/workspace`);
  return ((await res.json()) as Array<{ name: string }>).map((f) => f.name).sort();
}

beforeAll(async () => {
  ensureBuilt();
  home = mkdtempSync(join(tmpdir(), 'sbx-upload-mem-'));
  spoolTmp = join(home, 'tmp');
  rmSync(spoolTmp, { recursive: true, force: true });
  (await import('node:fs')).mkdirSync(spoolTmp);
  await startServe();
  const res = await fetch(`${url}/api/v1/sandboxes`, { method: 'POST' });
  sandbox = ((await res.json()) as { id: string }).id;
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  if (home) rmSync(home, { recursive: true, force: true });
}, 30_000);

describe('JSON uploads stream into the sandbox (issue 30 item 9)', () => {
  it(`${UPLOADS} concurrent 63 MB base64 uploads all succeed byte-exact; peak RSS ≤ 600 MB, then ≤ 300 MB`, async () => {
    const orders: Order[] = ['path-first', 'encoding-after', 'path-after'];
    const started = memory();
    const results = await Promise.all(
      Array.from({ length: UPLOADS }, (_, i) => upload(`/workspace/up-${i}.bin`, FILE_BYTES, orders[i % orders.length]!)),
    );
    const after = memory();
    for (const [i, r] of results.entries()) {
      expect(r.status, `upload ${i} (${orders[i % orders.length]}): ${JSON.stringify(r.body)}`).toBe(200);
      expect(r.body).toEqual({ status: 'written' });
      expect(await sha256Of(`/workspace/up-${i}.bin`), `upload ${i}`).toBe(r.sha256);
    }
    // Nothing but the files: no temporary names in the sandbox, no spool left on the host.
    expect(await workspace()).toEqual(Array.from({ length: UPLOADS }, (_, i) => `up-${i}.bin`).sort());
    expect(readdirSync(spoolTmp)).toEqual([]);
    console.log(
      `upload memory: RSS before ${started.rssMb.toFixed(0)} MB, peak ${after.peakMb.toFixed(0)} MB over ${UPLOADS} × ${(
        (4 * Math.ceil(FILE_BYTES / 3)) / MiB
      ).toFixed(1)} MiB bodies`,
    );
    expect(after.peakMb).toBeLessThanOrEqual(600);
    // Back down once they are done (bounded wait: the collector and the allocator give memory back).
    const deadline = Date.now() + 10_000;
    let now = memory().rssMb;
    while (now > 300 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      now = memory().rssMb;
    }
    console.log(`upload memory: RSS ${now.toFixed(0)} MB afterwards`);
    expect(now).toBeLessThanOrEqual(300);
  }, 300_000);

  it('a body that turns malformed mid-stream is 400, leaving no file, no temporary file and no spool', async () => {
    for (const order of ['path-first', 'encoding-after', 'path-after'] as const) {
      const r = await upload(`/workspace/bad-${order}.bin`, 12 * MiB, order, 6 * MiB);
      expect(r.status, order).toBe(400);
      expect(r.body.code, order).toBe('bad_request');
      const back = await fetch(`${url}/api/v1/sandboxes/${sandbox}/files?path=/workspace/bad-${order}.bin`);
      expect(back.status, order).toBe(404);
    }
    expect((await workspace()).filter((n) => !n.startsWith('up-'))).toEqual([]);
    // The spool goes with its request, once the answer is out.
    const deadline = Date.now() + 5_000;
    while (readdirSync(spoolTmp).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(spoolTmp)).toEqual([]);
  }, 120_000);
});
