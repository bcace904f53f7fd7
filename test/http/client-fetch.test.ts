/**
 * The typed client over the fetch transport (the browser entry, src/client/browser.ts) in Node,
 * against a real control plane on a real port (mock provider, temp SQLite): spawn, exec buffered
 * and streamed, a binary file byte-exact both ways, listing, error bodies mapped to SbxError like
 * the undici transport maps them, auth headers, the event stream read without eventsource, destroy.
 */
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, FetchTransport, SbxError } from '../../src/client/browser.js';
import { Client as NodeClient } from '../../src/client/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KEY = 'fetch-client-key-0123456789abcdef01';
let srv: TestServer;
let sbx: Client;
/** Requests that went through the fetch transport (method and path). */
const seen: string[] = [];

beforeAll(async () => {
  srv = await startTestServer({ auth: { api_key: KEY } });
  const counting: typeof fetch = (input, init) => {
    seen.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
    return fetch(input, init);
  };
  sbx = new Client({ url: srv.url, apiKey: KEY, transport: new FetchTransport({ fetch: counting }) });
}, 60_000);
afterAll(async () => {
  await sbx?.close();
  await srv?.close();
});

describe('typed client over fetch', () => {
  it('spawns, execs, writes and reads a binary file byte-exact, lists, destroys', async () => {
    const box = await sbx.spawn({ ttl: '5m' });
    expect(box.state).toBe('running');
    expect(seen).toContain('POST /api/v1/sandboxes');

    const run = await sbx.exec(box.id, { command: 'printf "%s-%s" hello world; echo err >&2; exit 3' });
    expect(run).toMatchObject({ stdout: 'hello-world', stderr: 'err\n', exit_code: 3 });
    const stdin = await sbx.exec(box.id, { command: 'cat', mode: 'argv', stdin: new Uint8Array([0x68, 0x69, 0x0a]) });
    expect(stdin.stdout).toBe('hi\n');

    const chunks = [];
    for await (const c of sbx.execStream(box.id, { command: 'echo one; echo two >&2; echo three' })) chunks.push(c);
    expect(
      chunks
        .filter((c) => c.stream === 'stdout')
        .map((c) => c.data)
        .join(''),
    ).toBe('one\nthree\n');
    expect(
      chunks
        .filter((c) => c.stream === 'stderr')
        .map((c) => c.data)
        .join(''),
    ).toBe('two\n');
    expect(chunks.at(-1)).toMatchObject({ stream: 'exit', exit_code: 0 });

    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(await sbx.files.write(box.id, '/tmp/all.bin', all)).toEqual({ status: 'written' });
    const back = await sbx.files.read(box.id, '/tmp/all.bin');
    expect(back).toBeInstanceOf(Uint8Array);
    expect(Array.from(back)).toEqual(Array.from(all));
    // The server stored 256 bytes, not a text rendering of them.
    expect((await sbx.files.stat(box.id, '/tmp/all.bin')).size).toBe(256);
    await sbx.files.write(box.id, '/tmp/note.txt', 'héllo\n');
    expect(new TextDecoder().decode(await sbx.files.read(box.id, '/tmp/note.txt'))).toBe('héllo\n');

    const names = (await sbx.files.list(box.id, '/tmp')).map((f) => f.name);
    expect(names).toEqual(expect.arrayContaining(['all.bin', 'note.txt']));
    expect((await sbx.list()).map((s) => s.id)).toContain(box.id);
    expect((await sbx.readLogs(box.id, { lines: 5 })).lines).toBeInstanceOf(Array);

    expect(await sbx.destroy(box.id)).toEqual({ status: 'destroyed' });
    expect(seen).toContain(`DELETE /api/v1/sandboxes/${box.id}`);
  });

  it('maps error bodies to SbxError the same way as the undici transport', async () => {
    const raw = await fetch(`${srv.url}/api/v1/sandboxes/sb-nope`, { headers: { 'x-api-key': KEY } });
    const body = (await raw.json()) as { code: string; message: string };
    expect(body.code).toBe('not_found');

    const err = await sbx.get('sb-nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect(err).toMatchObject({
      code: 'not_found',
      message: body.message,
      details: { status: 404, method: 'GET', path: '/api/v1/sandboxes/sb-nope' },
    });
    const node = new NodeClient({ url: srv.url, apiKey: KEY });
    try {
      const viaUndici = await node.get('sb-nope').catch((e: unknown) => e);
      expect({ ...(viaUndici as SbxError), message: (viaUndici as SbxError).message }).toEqual({
        ...(err as SbxError),
        message: (err as SbxError).message,
      });
    } finally {
      await node.close();
    }
    // A streamed call refused before it starts throws too, and exec errors keep their code.
    await expect(
      (async () => {
        for await (const _ of sbx.execStream('sb-nope', { command: 'true' })) void _;
      })(),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('sends the key as a header: without it the server refuses', async () => {
    const anon = new Client({ url: srv.url });
    await expect(anon.list()).rejects.toMatchObject({ code: 'unauthorized' });
    const wrong = new Client({ url: srv.url, apiKey: 'not-the-key-0123456789abcdef0123' });
    await expect(wrong.list()).rejects.toBeInstanceOf(SbxError);
  });

  it('reports an unreachable server as unavailable, naming the URL and the reason', async () => {
    // A port that was just free: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const down = new Client({ url: `http://127.0.0.1:${port}` });
    const err = await down.health().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect(err).toMatchObject({
      code: 'unavailable',
      message: `cannot reach sbx server at http://127.0.0.1:${port}: connection refused (ECONNREFUSED)`,
    });
  });

  it('reads the event stream over fetch (no eventsource), from a given id', async () => {
    const box = await sbx.spawn({ ttl: '5m' });
    const ctl = new AbortController();
    const states: string[] = [];
    const got: string[] = [];
    for await (const ev of sbx.events({ sandboxId: box.id, lastEventId: 0, signal: ctl.signal, onState: (s) => states.push(s) })) {
      expect(ev.sandbox_id).toBe(box.id);
      got.push(ev.type);
      if (ev.type === 'sandbox.created') {
        void sbx.destroy(box.id);
      }
      if (ev.type === 'sandbox.destroyed') ctl.abort();
    }
    expect(got).toEqual(expect.arrayContaining(['sandbox.created', 'sandbox.destroyed']));
    expect(states[0]).toBe('open');
    expect(seen.filter((s) => s === 'GET /api/v1/events').length).toBeGreaterThan(0);
  });
});
