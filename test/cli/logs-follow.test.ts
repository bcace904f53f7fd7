/**
 * `sbx logs -f` against a real server: every console line exactly once, repeated and blank lines
 * included (log cursors), and the content-overlap fallback against a server without cursors.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, TEST_IMAGE } from '../docker/engine.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

/** Resolves once `check()` holds, polling; fails after `ms`. */
async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const count = (text: string) => text.split('\n').length - 1;

/**
 * Runs `logs -f` while `execs` run one after another; returns what it printed and the lines
 * expected. After a big exec it waits for the follower to catch up: the console keeps 1000
 * lines, and lines pushed out before a reader comes back are gone for every reader.
 */
async function followWhile(
  sbx: ReturnType<typeof sbxAt>,
  id: string,
  execs: Array<{ script: string; lines: string[] }>,
  extra: string[] = [],
  execVia = sbx,
) {
  const stop = new AbortController();
  let seen = '';
  const following = sbx(['logs', id, '-f', ...extra], { signal: stop.signal, onStdout: (_c, all) => void (seen = all()) });
  await new Promise((r) => setTimeout(r, 300));
  const before = count(seen);
  const expected: string[] = [];
  for (const e of execs) {
    const r = await execVia(['exec', '--sh', id, e.script]);
    expect(r.code, r.stderr).toBe(0);
    expected.push(...e.lines);
    if (e.lines.length >= 100) await until(() => count(seen) >= before + expected.length, 10_000, `${expected.length} lines`);
    // Let some execs land between polls and others together in one.
    else if (expected.length % 2 === 0) await new Promise((r) => setTimeout(r, 150));
  }
  return { following, stop, expected, seen: () => seen };
}

const times = (n: number, line: string) => Array.from({ length: n }, () => line);

function repeatedExecs(): Array<{ script: string; lines: string[] }> {
  return [
    { script: 'i=0; while [ $i -lt 40 ]; do echo ok; i=$((i+1)); done', lines: times(40, 'ok') },
    { script: 'echo ok; echo; echo; echo ok', lines: ['ok', '', '', 'ok'] },
    { script: 'echo ok', lines: ['ok'] },
    { script: 'echo ok', lines: ['ok'] },
    { script: 'echo ok >&2; echo ok', lines: ['ok', 'ok'] },
    // Past 1000 lines the console ring wraps: a tail window of `ok`, blank, `ok`, blank … then
    // looks the same after two more such lines, which matching by content takes as nothing new.
    { script: 'i=0; while [ $i -lt 300 ]; do echo ok; echo; i=$((i+1)); done', lines: times(300, 'ok').flatMap((l) => [l, '']) },
    { script: 'i=0; while [ $i -lt 300 ]; do echo ok; echo; i=$((i+1)); done', lines: times(300, 'ok').flatMap((l) => [l, '']) },
    { script: 'echo ok; echo', lines: ['ok', ''] },
    { script: 'echo ok; echo', lines: ['ok', ''] },
    { script: 'echo; echo ok', lines: ['', 'ok'] },
  ];
}

describe('sbx logs -f with log cursors', () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  beforeAll(async () => {
    server = await startTestServer();
    sbx = sbxAt(server.url);
  });
  afterAll(async () => server?.close());

  it('prints every line exactly once, repeated and blank ones included', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    await sbx(['exec', '--sh', id, 'echo ok; echo ok; echo']);
    const execs = repeatedExecs();
    const run = await followWhile(sbx, id, execs);
    const want = ['ok', 'ok', '', ...run.expected];
    await until(() => count(run.seen()) >= want.length, 10_000, `${want.length} lines`);
    // One more poll interval: nothing may arrive twice.
    await new Promise((r) => setTimeout(r, 1200));
    run.stop.abort();
    const r = await run.following;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(want.map((l) => `${l}\n`).join(''));
  });

  it('-n starts from the last lines; --json prints one JSON string per line', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    await sbx(['exec', '--sh', id, 'echo a; echo b; echo c']);
    const run = await followWhile(sbx, id, [{ script: 'echo c; echo c', lines: ['c', 'c'] }], ['-n', '1', '--json']);
    await until(() => count(run.seen()) >= 3, 10_000, '3 lines');
    await new Promise((r) => setTimeout(r, 1200));
    run.stop.abort();
    const r = await run.following;
    expect(r.stdout).toBe('"c"\n"c"\n"c"\n');
  });
});

/**
 * A reverse proxy that hides the sbx log-cursor extension, standing in for an older server: the
 * client then has no cursor and falls back to matching the overlap of tail windows.
 */
async function cursorlessProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const up = request({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers }, (upRes) => {
      const headers = { ...upRes.headers };
      delete headers['x-log-cursor'];
      res.writeHead(upRes.statusCode ?? 502, headers);
      upRes.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('sbx logs -f against a server without log cursors', () => {
  let server: TestServer;
  let proxy: Awaited<ReturnType<typeof cursorlessProxy>>;
  beforeAll(async () => {
    server = await startTestServer();
    proxy = await cursorlessProxy(server.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await server?.close();
  });

  it('follows distinct lines by their overlap', async () => {
    const sbx = sbxAt(proxy.url);
    // exec goes straight to the server (this little proxy forwards no WebSocket upgrades).
    const direct = sbxAt(server.url);
    const id = (await sbx(['spawn'])).stdout.trim();
    await direct(['exec', '--sh', id, 'echo a1; echo a2']);
    const run = await followWhile(
      sbx,
      id,
      [
        { script: 'echo b1; echo b2', lines: ['b1', 'b2'] },
        { script: 'echo c1', lines: ['c1'] },
      ],
      [],
      direct,
    );
    await until(() => run.seen().includes('c1\n'), 10_000, 'c1');
    await new Promise((r) => setTimeout(r, 1200));
    run.stop.abort();
    const r = await run.following;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('a1\na2\nb1\nb2\nc1\n');
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx logs -f on the docker provider'), () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  beforeAll(async () => {
    server = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    sbx = sbxAt(server.url);
  });
  afterAll(async () => server?.close());

  it('prints every line exactly once, repeated and blank ones included', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    expect(id).toMatch(/^sb-/);
    try {
      const run = await followWhile(sbx, id, repeatedExecs());
      await until(() => count(run.seen()) >= run.expected.length, 20_000, `${run.expected.length} lines`);
      await new Promise((r) => setTimeout(r, 1200));
      run.stop.abort();
      const r = await run.following;
      expect(r.stdout).toBe(run.expected.map((l) => `${l}\n`).join(''));
    } finally {
      await sbx(['rm', id]);
    }
  });
});
