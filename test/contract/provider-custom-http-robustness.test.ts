/**
 * The custom HTTP client against backends that misbehave on purpose (a tiny node:http server per
 * test): hangs end as `timeout` within the deadline, garbage as `provider_error`, statuses map to
 * typed errors, a backend's text and the API key never reach a message, and only idempotent calls
 * are retried. Plus the reference server's key check.
 */
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCustomHttpProvider } from '../../src/adapters/providers/custom-http/index.js';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { SbxError } from '../../src/core/errors.js';
import type { Provider } from '../../src/core/ports/index.js';
import { buildProviderServer } from '../../src/transports/provider-server/app.js';
import { collect, never, sh } from './provider-contract-helpers.js';

const KEY = 'sbx-test-backend-key-0b9e4f7a1c2d';
const LEAK = 'BACKEND-INTERNAL-TEXT-do-not-show';

interface Seen {
  method: string;
  url: string;
  key: string | undefined;
}

let servers: Server[] = [];
let providers: Provider[] = [];
afterEach(async () => {
  for (const p of providers) await p.close?.();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  servers = [];
  providers = [];
});

/** A backend answering with `handler`; returns a client of it (timeout 600 ms, fast backoff) and the requests it saw. */
async function backend(handler: (req: IncomingMessage, res: ServerResponse) => void, timeoutMs = 600) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, key: req.headers['x-api-key'] as string | undefined });
    req.resume();
    handler(req, res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const provider = createCustomHttpProvider({ baseUrl: url, apiKey: KEY, timeoutMs, backoffMs: 10 });
  providers.push(provider);
  return { provider, seen, url };
}

async function failure(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  const e = err as SbxError;
  expect(e.message).not.toContain(LEAK);
  expect(e.message).not.toContain(KEY);
  return e;
}

const answer =
  (status: number, body = LEAK, type = 'text/plain') =>
  (_req: IncomingMessage, res: ServerResponse) =>
    res.writeHead(status, { 'content-type': type }).end(body);

describe('custom HTTP client against a misbehaving backend', () => {
  it('a backend that never answers is `timeout` within the deadline, for plain, retried and streamed calls', async () => {
    const { provider } = await backend(() => undefined, 500);
    for (const call of [
      () => provider.status('rt1'),
      () => provider.stat('rt1', '/x'),
      () => provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null }),
      () => collect(provider.exec('rt1', sh('true'), never)),
    ]) {
      const started = Date.now();
      expect((await failure(call())).code).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(1_500);
    }
    const h = await provider.health();
    expect(h.healthy).toBe(false);
    expect(h.error).toMatch(/did not answer within 500 ms/);
  });

  it("the caller's abort ends a hung call at once with the caller's reason; a long-lived signal keeps no listeners", async () => {
    const hung = (await backend(() => undefined, 5_000)).provider;
    const ac = new AbortController();
    const started = Date.now();
    const pending = hung.status('rt', ac.signal).catch((e: unknown) => e);
    setTimeout(() => ac.abort(new Error('caller cancelled')), 100);
    expect(((await pending) as Error).message).toBe('caller cancelled');
    expect(Date.now() - started).toBeLessThan(1_000);

    const ok = (await backend(answer(200, '{"state":"running"}', 'application/json'))).provider;
    const longLived = new AbortController();
    for (let i = 0; i < 30; i++) expect(await ok.status('rt', longLived.signal)).toBe('running');
    await new Promise((r) => setTimeout(r, 20));
    expect(getEventListeners(longLived.signal, 'abort')).toHaveLength(0);
  });

  it('headers then silence on a JSON answer is `timeout` too', async () => {
    const { provider } = await backend((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":');
    }, 400);
    const started = Date.now();
    expect(
      (await failure(provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null }))).code,
    ).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('garbage and wrong shapes are provider_error, without the garbage', async () => {
    expect((await failure((await backend(answer(200, `<html>${LEAK}</html>`))).provider.stat('rt', '/x'))).code).toBe('provider_error');
    expect(
      (await failure((await backend(answer(200, JSON.stringify({ path: 5, note: LEAK }), 'application/json'))).provider.stat('rt', '/x')))
        .code,
    ).toBe('provider_error');
    expect(
      (
        await failure(
          (
            await backend(answer(200, JSON.stringify({ nope: LEAK }), 'application/json'))
          ).provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null }),
        )
      ).code,
    ).toBe('provider_error');
    expect(
      (await failure((await backend(answer(200, JSON.stringify({ state: LEAK }), 'application/json'))).provider.status('rt'))).code,
    ).toBe('provider_error');
    const h = await (await backend(answer(200, `{${LEAK}`, 'application/json'))).provider.health();
    expect(h.healthy).toBe(false);
    expect(h.error).not.toContain(LEAK);
  });

  it('exec streams: a garbage line and a dropped connection are typed errors; a stream without an exit line ends with none', async () => {
    const ndjson = (body: string) => (_req: IncomingMessage, res: ServerResponse) =>
      res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end(body);
    const garbage = (await backend(ndjson(`{"stream":"stdout","data":"ok"}\n${LEAK}\n`))).provider;
    expect((await failure(collect(garbage.exec('rt', sh('x'), never)))).code).toBe('provider_error');
    const noExit = (await backend(ndjson('{"stream":"stdout","data":"ok"}\n'))).provider;
    // The anchor's contract sends output lines only (DESIGN §12): no exit event, no error.
    const ended = await collect(noExit.exec('rt', sh('x'), never));
    expect(ended.stdout).toBe('ok');
    expect(ended.exitCode).toBeNull();
    expect(ended.events).toHaveLength(1);
    const dropped = (
      await backend((req, res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write('{"stream":"stdout","data":"partial"}\n', () => setTimeout(() => req.socket.destroy(), 50));
      })
    ).provider;
    expect((await failure(collect(dropped.exec('rt', sh('x'), never)))).code).toBe('unavailable');
    const reported = (await backend(ndjson(`{"stream":"error","code":"not_found","message":"${LEAK}"}\n`))).provider;
    expect((await failure(collect(reported.exec('rt', sh('x'), never)))).code).toBe('not_found');
    // Output split across reads and lines, one base64 chunk: parsed as it arrives.
    const split = (
      await backend((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write('{"stream":"stdout","da');
        setTimeout(
          () => res.end('ta":"a\\n"}\n{"stream":"stderr","data":"/w==","encoding":"base64"}\n{"stream":"exit","exit_code":7}\n'),
          30,
        );
      })
    ).provider;
    const got = await collect(split.exec('rt', sh('x'), never));
    expect(got.stdout).toBe('a\n');
    expect(got.events[1]).toEqual({ stream: 'stderr', data: Buffer.from([0xff]) });
    expect(got.exitCode).toBe(7);
  });

  it('maps statuses to typed errors: 404, 408, 429, 503, others provider_error; 404 of status and destroy is not an error', async () => {
    const spawn = (p: Provider) => p.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null });
    const codes: Array<[number, string]> = [
      [404, 'not_found'],
      [408, 'timeout'],
      [429, 'resource_limit'],
      [503, 'unavailable'],
      [500, 'provider_error'],
      [418, 'provider_error'],
      [401, 'provider_error'],
    ];
    for (const [status, code] of codes)
      expect((await failure(spawn((await backend(answer(status))).provider))).code, `status ${status}`).toBe(code);
    const gone = (await backend(answer(404))).provider;
    expect(await gone.status('rt')).toBe('missing');
    await gone.destroy('rt');
    expect((await failure(gone.readFile('rt', '/x'))).code).toBe('not_found');
  });

  it("reads the anchor's Go field names for files and a bare health answer", async () => {
    const go = [
      { Path: '/w/b.txt', Size: 3, Mode: '644', IsDir: false, ModTime: '2024-01-02T03:04:05Z' },
      { Path: '/w/a', Size: 0, Mode: '0755', IsDir: true },
    ];
    const b = await backend((req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(req.url!.startsWith('/health') ? 'ok' : JSON.stringify(go)),
    );
    expect(await b.provider.listFiles('rt', '/w')).toEqual([
      { name: 'a', path: '/w/a', size: 0, is_dir: true, mod_time: '1970-01-01T00:00:00.000Z', mode: '0755' },
      { name: 'b.txt', path: '/w/b.txt', size: 3, is_dir: false, mod_time: '2024-01-02T03:04:05.000Z', mode: '0644' },
    ]);
    expect((await b.provider.health()).healthy).toBe(true);
    expect(b.provider.capabilities).toEqual(['spawn', 'exec', 'exec_stream', 'files', 'health']);
  });

  it('a spawn asking for a network the backend does not confirm is undone and not_implemented', async () => {
    const b = await backend((req, res) =>
      req.method === 'POST' ? res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"rt-net"}') : res.writeHead(204).end(),
    );
    const e = await failure(
      b.provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null, network: 'none' }),
    );
    expect(e.code).toBe('not_implemented');
    expect(b.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /spawn', 'DELETE /sandboxes/rt-net']);
    expect(await b.provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null })).toEqual({
      runtime_id: 'rt-net',
    });
  });

  it('retries only idempotent calls (GET, destroy), with a cap; the key goes with every request', async () => {
    const b = await backend(answer(503));
    await failure(b.provider.status('rt'));
    expect(b.seen.filter((s) => s.method === 'GET')).toHaveLength(3);
    await failure(b.provider.destroy('rt'));
    expect(b.seen.filter((s) => s.method === 'DELETE' && s.url.startsWith('/sandboxes/'))).toHaveLength(3);
    const before = b.seen.length;
    await failure(b.provider.spawn({ sandbox_id: 's', image: 'i', memory_mb: 1, vcpus: 1, metadata: {}, owner_id: null }));
    await failure(b.provider.deleteFile('rt', '/x', false));
    await failure(b.provider.writeFile('rt', '/x', Buffer.from('x'), undefined));
    await failure(collect(b.provider.exec('rt', sh('x'), never)));
    expect(b.seen.length - before).toBe(4);
    expect(b.seen.every((s) => s.key === KEY)).toBe(true);

    // A dropped connection on a GET is retried; the second answer counts.
    let n = 0;
    const flaky = await backend((req, res) =>
      ++n === 1 ? req.socket.destroy() : res.writeHead(200, { 'content-type': 'application/json' }).end('{"state":"running"}'),
    );
    expect(await flaky.provider.status('rt')).toBe('running');
    expect(flaky.seen).toHaveLength(2);
  });

  it('an unreachable backend is `unavailable`; neither the key nor URL credentials show in errors or config()', async () => {
    const p = createCustomHttpProvider({ baseUrl: `http://user:${LEAK}@127.0.0.1:1`, apiKey: KEY, timeoutMs: 500, backoffMs: 5 });
    providers.push(p);
    const e = await failure(p.status('rt'));
    expect(e.code).toBe('unavailable');
    expect(JSON.stringify(p.config())).not.toContain(KEY);
    expect(JSON.stringify(p.config())).not.toContain(LEAK);
    expect((await p.health()).error).not.toContain(LEAK);
  });
});

describe('live stdin and signals', () => {
  it(
    'a backend that does not announce exec_stdin answers live stdin with not_implemented; the reference ' + 'server does, asked lazily',
    async () => {
      const plain = (await backend(answer(200, '{"ok":true}', 'application/json'))).provider;
      const live = {
        async *[Symbol.asyncIterator]() {
          yield Buffer.from('x');
        },
      };
      expect((await failure(collect(plain.exec('rt', sh('cat', { stdin: live }), never)))).code).toBe('not_implemented');

      const dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-live-'));
      const mock = createMockProvider({ rootDir: join(dir, 'sb') });
      const app = await buildProviderServer({ provider: mock, apiKey: KEY });
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      const fresh = createCustomHttpProvider({ baseUrl: url, apiKey: KEY, timeoutMs: 5_000 });
      providers.push(fresh);
      try {
        const { runtime_id } = await fresh.spawn({
          sandbox_id: 'sb-live1',
          image: 'host',
          memory_mb: 64,
          vcpus: 1,
          metadata: {},
          owner_id: null,
        });
        const res = await collect(
          fresh.exec(
            runtime_id,
            sh('cat', {
              stdin: {
                async *[Symbol.asyncIterator]() {
                  yield Buffer.from('one ');
                  yield Buffer.from('two');
                },
              },
            }),
            never,
          ),
        );
        expect(res).toMatchObject({ stdout: 'one two', exitCode: 0 });
      } finally {
        await app.close();
        await mock.close?.();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

describe('reference server key check', () => {
  it('refuses requests without the key or with a wrong one; the client reports it without the key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-auth-'));
    const mock = createMockProvider({ rootDir: join(dir, 'sb') });
    const app = await buildProviderServer({ provider: mock, apiKey: KEY });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      expect((await fetch(`${url}/health`)).status).toBe(401);
      expect((await fetch(`${url}/health`, { headers: { 'x-api-key': 'wrong' } })).status).toBe(401);
      expect((await fetch(`${url}/health`, { headers: { 'x-api-key': KEY } })).status).toBe(200);
      const wrong = createCustomHttpProvider({ baseUrl: url, apiKey: 'not-the-key', timeoutMs: 2_000 });
      providers.push(wrong);
      const e = await failure(wrong.status('rt'));
      expect(e.message).toMatch(/refused the API key/);
      expect(e.message).not.toContain('not-the-key');
    } finally {
      await app.close();
      await mock.close?.();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
