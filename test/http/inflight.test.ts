import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  // A 1 MiB budget: two 600 kB uploads do not fit at once, two 300 kB ones do.
  srv = await startTestServer({ server: { max_inflight_mb: 1 } });
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
});
afterAll(async () => srv?.close());

const FILES = () => `/api/v1/sandboxes/${id}/files`;
const upload = (path: string, size: number) => JSON.stringify({ path, content: 'u'.repeat(size) });

/** An upload over a raw socket: headers and the first part of the body now, the rest on `finish`. */
function heldUpload(body: string): Promise<{ sock: Socket; finish: () => Promise<{ status: number; text: string }> }> {
  const { port, hostname } = new URL(srv.url);
  const bytes = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const sock = connect({ port: Number(port), host: hostname }, () => {
      sock.write(
        `POST ${FILES()} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ` +
          `${bytes.length}\r\nConnection: close\r\n\r\n`,
      );
      sock.write(bytes.subarray(0, 1000));
      let data = '';
      sock.on('data', (d) => (data += d.toString()));
      const closed = new Promise<void>((r) => sock.on('close', () => r()));
      resolve({
        sock,
        finish: async () => {
          sock.write(bytes.subarray(1000));
          await closed;
          return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]), text: data.slice(data.indexOf('\r\n\r\n') + 4) };
        },
      });
    });
    sock.on('error', reject);
  });
}

/** Bytes the server holds for requests in flight now. */
const inflight = () => srv.plane.deps.inflight!.inflight;
/** Waits until the server holds more than `than` bytes: a held request was taken in (its headers parsed, its bytes counted). */
const heldOver = (than: number) => waitFor(`more than ${than} bytes in flight`, () => inflight() > than);

describe('in-flight byte budget (server.max_inflight_mb, issue 12.5)', () => {
  it('an upload that does not fit beside one in flight gets 503 unavailable with Retry-After; it succeeds afterwards', async () => {
    const first = await heldUpload(upload('/workspace/one.txt', 600_000));
    await heldOver(0);
    const second = await call(srv.url, 'POST', FILES(), upload('/workspace/two.txt', 600_000));
    expect(second.status).toBe(503);
    expect(second.body).toEqual({ code: 'unavailable', message: expect.stringContaining('server.max_inflight_mb') });
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    const done = await first.finish();
    expect(done.status).toBe(200);
    // The budget is back: the same upload now fits.
    expect((await call(srv.url, 'POST', FILES(), upload('/workspace/two.txt', 600_000))).status).toBe(200);
    expect(await (await fetch(`${srv.url}${FILES()}?path=/workspace/two.txt`)).text()).toHaveLength(600_000);
  });

  it('uploads under the budget together all succeed', async () => {
    const a = await heldUpload(upload('/workspace/a.txt', 300_000));
    await heldOver(0);
    const one = inflight();
    const held = [a, await heldUpload(upload('/workspace/b.txt', 300_000))];
    await heldOver(one);
    const third = await call(srv.url, 'POST', FILES(), upload('/workspace/c.txt', 300_000));
    expect(third.status).toBe(200);
    const results = await Promise.all(held.map((h) => h.finish()));
    expect(results.map((r) => r.status)).toEqual([200, 200]);
  });

  it('a body without Content-Length is counted as it streams and refused once over the budget', async () => {
    const big = Buffer.from(upload('/workspace/chunked.txt', 1_200_000));
    const chunks = async function* () {
      for (let at = 0; at < big.length; at += 64 * 1024) yield big.subarray(at, at + 64 * 1024);
    };
    const res = await fetch(srv.url + FILES(), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: ReadableStream.from(chunks()),
      duplex: 'half',
    } as RequestInit).catch((err: Error) => err);
    // The refusal may land while the client is still sending; when it is read, it is the 503.
    if (!(res instanceof Error)) {
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBeTruthy();
      expect(((await res.json()) as { code: string }).code).toBe('unavailable');
    }
    expect((await fetch(`${srv.url}${FILES()}?path=/workspace/chunked.txt`)).status).toBe(404);
    const small = Buffer.from(upload('/workspace/chunked.txt', 1000));
    const ok = await fetch(srv.url + FILES(), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: ReadableStream.from(
        (async function* () {
          yield small;
        })(),
      ),
      duplex: 'half',
    } as RequestInit);
    expect(ok.status).toBe(200);
  });

  it('a client that goes away mid-upload gives its bytes back', async () => {
    const gone = await heldUpload(upload('/workspace/gone.txt', 900_000));
    await heldOver(0);
    expect((await call(srv.url, 'POST', FILES(), upload('/workspace/x.txt', 300_000))).status).toBe(503);
    gone.sock.destroy();
    await waitFor('its bytes given back', () => inflight() === 0);
    expect((await call(srv.url, 'POST', FILES(), upload('/workspace/x.txt', 900_000))).status).toBe(200);
  });

  it('buffered exec output counts too: output over the budget is 503 with Retry-After, smaller output is fine', async () => {
    const over = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'head -c 3000000 /dev/zero' });
    expect(over.status).toBe(503);
    expect(over.body.code).toBe('unavailable');
    expect(Object.keys(over.body).sort()).toEqual(['code', 'message']);
    expect(over.headers.get('retry-after')).toBe('1');
    const fine = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'head -c 100000 /dev/zero | wc -c' });
    expect(fine.status).toBe(200);
    expect(fine.body.stdout.trim()).toBe('100000');
    // Nothing is left held: a full-budget-sized upload still fits.
    expect((await call(srv.url, 'POST', FILES(), upload('/workspace/after.txt', 1_000_000))).status).toBe(200);
  });

  it('buffered execs over the budget together: the oldest finish, the newest give way with 503', async () => {
    // Each holds 200 kB of output (four copies of it against a 1 MiB budget) while it sleeps: two do not fit.
    const run = () => call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'head -c 200000 /dev/zero; sleep 0.5' });
    const first = run();
    await heldOver(0);
    const later = await Promise.all([run(), run()]);
    const statuses = [(await first).status, ...later.map((r) => r.status)];
    expect(statuses[0]).toBe(200);
    expect((await first).body.stdout).toHaveLength(200000);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
    for (const r of later.filter((x) => x.status === 503)) expect(r.body.code).toBe('unavailable');
    // All of it is back afterwards.
    expect((await call(srv.url, 'POST', FILES(), upload('/workspace/after2.txt', 1_000_000))).status).toBe(200);
  });
});
