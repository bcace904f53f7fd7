import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import type { Provider } from '../../src/core/ports/index.js';
import { createHostedProvider } from '../../src/adapters/providers/hosted/index.js';
import { exitCodeOf } from '../../src/adapters/providers/hosted/exec.js';
import { modeBits } from '../../src/adapters/providers/hosted/files.js';
import { envelope } from '../../src/adapters/providers/hosted/transport.js';
import { startE2bStandin, type Standin } from '../helpers/e2b-standin.js';

const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';
const never = new AbortController().signal;
const spawnSpec = (id = 'sb-unit1') => ({ sandbox_id: id, image: 'base', memory_mb: 256, vcpus: 1, metadata: {}, owner_id: 'alice' });

/** A fake backend answering every request with `handler`; records what it saw. */
async function fake(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

async function failure(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  const e = err as SbxError;
  expect(e.message).not.toContain(KEY);
  expect(e.message).not.toContain('SECRET-BODY');
  return e;
}

describe('hosted provider: error mapping', () => {
  const servers: Server[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      s.close();
    }
  });
  const provider = async (status: number, body = '{"code":0,"message":"SECRET-BODY ' + KEY + '"}', type = 'application/json') => {
    const f = await fake((_req, res) => res.writeHead(status, { 'content-type': type }).end(body));
    servers.push(f.server);
    return createHostedProvider({ apiKey: KEY, baseUrl: f.url, envdUrl: () => `${f.url}/envd`, timeoutMs: 2_000 });
  };

  it('401 and 403 are provider_error naming the rejected key, never the key or the body', async () => {
    for (const s of [401, 403]) {
      const p = await provider(s);
      const e = await failure(p.spawn(spawnSpec()));
      expect(e.code).toBe('provider_error');
      expect(e.message).toContain('hosted provider rejected the API key');
      const h = await p.health();
      expect(h.healthy).toBe(false);
      expect(h.error).toContain('rejected the API key');
      expect(h.error).not.toContain(KEY);
    }
  });

  it('404 is not_found (spawn), missing (status), already gone (destroy)', async () => {
    const p = await provider(404);
    expect((await failure(p.spawn(spawnSpec()))).code).toBe('not_found');
    expect(await p.status('i-gone')).toBe('missing');
    await expect(p.destroy('i-gone')).resolves.toBeUndefined();
    expect((await failure(p.logs('i-gone', { lines: 5 }))).code).toBe('not_found');
    expect((await failure(p.stat('i-gone', '/workspace'))).code).toBe('not_found');
  });

  it('429 is resource_limit, 500 provider_error, 502/503 unavailable', async () => {
    expect((await failure((await provider(429)).spawn(spawnSpec()))).code).toBe('resource_limit');
    expect((await failure((await provider(500)).status('i-x'))).code).toBe('provider_error');
    expect((await failure((await provider(502)).status('i-x'))).code).toBe('unavailable');
    expect((await failure((await provider(503)).listRuntimes!())).code).toBe('unavailable');
  });

  it('garbage bodies are provider_error in our own words', async () => {
    expect((await failure((await provider(201, 'SECRET-BODY not json', 'text/plain')).spawn(spawnSpec()))).code).toBe('provider_error');
    expect((await failure((await provider(201, '{"noSandboxID":"SECRET-BODY"}')).spawn(spawnSpec()))).code).toBe('provider_error');
    expect((await failure((await provider(200, '{"sandboxes":"SECRET-BODY"}')).listRuntimes!())).code).toBe('provider_error');
  });

  it('a server that never answers is a timeout within the deadline', async () => {
    const f = await fake(() => undefined);
    servers.push(f.server);
    const p = createHostedProvider({ apiKey: KEY, baseUrl: f.url, timeoutMs: 300 });
    const started = Date.now();
    const e = await failure(p.status('i-hang'));
    expect(e.code).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2_000);
    const h = await p.health();
    expect(h.healthy).toBe(false);
    expect(h.error).toMatch(/did not answer/);
  });

  it('an unreachable API is unavailable', async () => {
    const f = await fake(() => undefined);
    const url = f.url;
    f.server.close();
    const e = await failure(createHostedProvider({ apiKey: KEY, baseUrl: url, timeoutMs: 2_000 }).status('i-x'));
    expect(e.code).toBe('unavailable');
  });

  it('the caller cancelling stays an abort, not a typed failure', async () => {
    const f = await fake(() => undefined);
    servers.push(f.server);
    const ac = new AbortController();
    const p = createHostedProvider({ apiKey: KEY, baseUrl: f.url, timeoutMs: 5_000 }).status('i-x', ac.signal);
    setTimeout(() => ac.abort(), 50);
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('envd stream failures: garbage frames and an end-stream error are typed', async () => {
    const sandbox = JSON.stringify({
      sandboxID: 'i-1',
      templateID: 'base',
      clientID: 'c',
      envdVersion: '0.2.0',
      envdAccessToken: 'tok-SECRET-BODY',
    });
    const modes: Record<string, (res: ServerResponse) => void> = {
      garbage: (res) =>
        res.writeHead(200, { 'content-type': 'application/connect+json' }).end(Buffer.from([0, 0, 0, 0, 3, 0x7b, 0x7b, 0x7b])),
      denied: (res) =>
        res
          .writeHead(200, { 'content-type': 'application/connect+json' })
          .end(envelope({ error: { code: 'unauthenticated', message: 'SECRET-BODY' } }, 2)),
      truncated: (res) => res.writeHead(200, { 'content-type': 'application/connect+json' }).end(Buffer.from([0, 0, 0, 0, 50, 1, 2])),
    };
    for (const [mode, answer] of Object.entries(modes)) {
      const f = await fake((req, res) =>
        req.url?.startsWith('/envd/') ? answer(res) : res.writeHead(200, { 'content-type': 'application/json' }).end(sandbox),
      );
      servers.push(f.server);
      const p = createHostedProvider({ apiKey: KEY, baseUrl: f.url, envdUrl: (id) => `${f.url}/envd/${id}`, timeoutMs: 2_000 });
      const it = p.exec('i-1', { command: 'true', args: [], mode: 'shell', env: {}, workdir: '/workspace' }, never)[Symbol.asyncIterator]();
      const e = await failure(it.next());
      expect(e.code, mode).toBe('provider_error');
      if (mode === 'denied') expect(e.message).toContain('access token');
      expect(e.message).not.toContain('tok-');
    }
  });

  it('envd keepalive events are skipped; output and the exit code come through', async () => {
    const sandbox = JSON.stringify({ sandboxID: 'i-2', templateID: 'base', clientID: 'c', envdVersion: '0.2.0' });
    const f = await fake((req, res) => {
      if (!req.url?.startsWith('/envd/')) return void res.writeHead(200, { 'content-type': 'application/json' }).end(sandbox);
      res.writeHead(200, { 'content-type': 'application/connect+json' });
      res.write(envelope({ event: { start: { pid: 7 } } }));
      res.write(envelope({ event: { keepalive: {} } }));
      res.write(envelope({ event: { data: { stderr: Buffer.from('warn\n').toString('base64') } } }));
      res.write(envelope({ event: { end: { exitCode: 4, exited: true, status: 'exit status 4' } } }));
      res.end(envelope({}, 2));
    });
    servers.push(f.server);
    const p = createHostedProvider({ apiKey: KEY, baseUrl: f.url, envdUrl: (id) => `${f.url}/envd/${id}` });
    const events = [];
    for await (const ev of p.exec('i-2', { command: 'x', args: [], mode: 'argv', env: {}, workdir: '/workspace' }, never)) events.push(ev);
    expect(events).toEqual([
      { stream: 'stderr', data: new Uint8Array(Buffer.from('warn\n')) },
      { stream: 'exit', exit_code: 4 },
    ]);
  });

  it('maps envd exit events and Go file modes', () => {
    expect(exitCodeOf({})).toBe(0);
    expect(exitCodeOf({ exitCode: 3, status: 'exit status 3' })).toBe(3);
    expect(exitCodeOf({ exitCode: -1, status: 'signal: terminated' })).toBe(143);
    expect(exitCodeOf({ exitCode: -1, status: 'signal: killed' })).toBe(137);
    expect(exitCodeOf({ exitCode: -1, status: 'signal: interrupt' })).toBe(130);
    expect(modeBits(0o644)).toBe(0o644);
    expect(modeBits((2 ** 31 + (1 << 20) + 0o777) >>> 0)).toBe(0o1777);
    expect(modeBits((1 << 23) + 0o755)).toBe(0o4755);
    expect(modeBits(0o100640)).toBe(0o640);
  });

  it('refuses to start without a key, and config() shows neither key nor token', () => {
    expect(() => createHostedProvider({ apiKey: ' ' })).toThrow(/API key is required/);
    const cfg = createHostedProvider({ apiKey: KEY }).config();
    expect(JSON.stringify(cfg)).not.toContain(KEY);
    expect(cfg).toMatchObject({ base_url: 'https://api.e2b.dev', template: 'base' });
  });
});

describe('hosted provider: request shapes (against the stand-in)', () => {
  let standin: Standin;
  let p: Provider;
  beforeAll(async () => {
    standin = await startE2bStandin({ apiKey: KEY });
    p = createHostedProvider({
      apiKey: KEY,
      baseUrl: standin.url,
      envdUrl: (id) => standin.envdUrl(id),
      template: 'my-tpl',
      sandboxTimeoutS: 600,
      installationId: 'inst-1',
    });
  });
  afterAll(async () => {
    await p?.close?.();
    await standin?.close();
  });

  it('spawn: POST /sandboxes with the key, template, timeout, labels; envd with the access token and user', async () => {
    const { runtime_id: rid } = await p.spawn({ ...spawnSpec('sb-shape1'), network: 'none' });
    const create = standin.requests.find((r) => r.method === 'POST' && r.path === '/sandboxes')!;
    expect(create.headers['x-api-key']).toBe(KEY);
    expect(create.body).toEqual({
      templateID: 'my-tpl',
      timeout: 600,
      secure: true,
      allow_internet_access: false,
      metadata: { sbx_managed: 'true', sbx_sandbox_id: 'sb-shape1', sbx_installation_id: 'inst-1', sbx_owner_id: 'alice' },
    });
    const mk = standin.requests.find((r) => r.path === '/envd/filesystem.Filesystem/MakeDir')!;
    expect(mk.headers['x-access-token']).toBe(standin.sandboxes.get(rid)!.token);
    expect(mk.headers.authorization).toBe(`Basic ${Buffer.from('root:').toString('base64')}`);
    expect(mk.headers['content-type']).toBe('application/json');
    expect(mk.headers['connect-protocol-version']).toBe('1');

    const before = standin.requests.length;
    const out: string[] = [];
    for await (const ev of p.exec(rid, { command: 'echo', args: ['hi'], mode: 'argv', env: {}, workdir: '/workspace' }, never))
      if (ev.stream === 'stdout') out.push(Buffer.from(ev.data).toString());
    expect(out.join('')).toBe('hi\n');
    const start = standin.requests.slice(before).find((r) => r.path === '/envd/process.Process/Start')!;
    expect(start.headers['content-type']).toBe('application/connect+json');
    expect(start.headers['keepalive-ping-interval']).toBe('50');

    // stdin: SendInput with the pid and base64 bytes, then CloseStdin.
    const mark = standin.requests.length;
    let echoed = '';
    for await (const ev of p.exec(
      rid,
      { command: 'cat', args: [], mode: 'shell', env: {}, workdir: '/workspace', stdin: Buffer.from('in put') },
      never,
    ))
      if (ev.stream === 'stdout') echoed += Buffer.from(ev.data).toString();
    expect(echoed).toBe('in put');
    const paths = standin.requests.slice(mark).map((r) => r.path);
    expect(paths).toEqual(
      expect.arrayContaining(['/envd/process.Process/Start', '/envd/process.Process/SendInput', '/envd/process.Process/CloseStdin']),
    );
    expect(paths.indexOf('/envd/process.Process/SendInput')).toBeLessThan(paths.indexOf('/envd/process.Process/CloseStdin'));

    const runtimes = await p.listRuntimes!();
    expect(runtimes).toEqual([{ runtime_id: rid, sandbox_id: 'sb-shape1', installation_id: 'inst-1', status: 'running' }]);
    const list = standin.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/sandboxes?')).pop()!;
    expect(new URLSearchParams(new URLSearchParams(list.path.split('?')[1]).get('metadata')!).get('sbx_installation_id')).toBe('inst-1');

    await p.destroy(rid);
    expect(standin.requests.some((r) => r.method === 'DELETE' && r.path === `/sandboxes/${rid}`)).toBe(true);
    expect(await p.status(rid)).toBe('missing');
  });

  it('a wrong key is refused by the stand-in as E2B does, and reported without the key', async () => {
    const bad = createHostedProvider({ apiKey: 'e2b_wrong', baseUrl: standin.url, envdUrl: (id) => standin.envdUrl(id) });
    const e = await failure(bad.spawn(spawnSpec('sb-badkey')));
    expect(e).toMatchObject({ code: 'provider_error', message: 'spawn: hosted provider rejected the API key' });
    expect(e.message).not.toContain('e2b_wrong');
  });
});
