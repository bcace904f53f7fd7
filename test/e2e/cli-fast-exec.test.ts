/**
 * The `sbx exec` fast path of bin/sbx.js (dist/cli-exec.cjs, issue 33) against the full CLI: the
 * same argv through both (SBX_CLI_FAST_PATH=0 turns the fast path off) gives the same stdout bytes,
 * stderr and exit code, over a matrix of exit codes, timeouts, options, id prefixes, errors, client
 * settings and stdin; each run also reports which path it took, so a fast path that silently never
 * runs fails here. Real server (auth on), real built bin, child processes.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { BIN, ensureBuilt, ROOT } from './build.js';

const API_KEY = 'fast-path-key-0123456789';

interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  /** Which path ran: 'fast' when dist/cli-exec.cjs ran it, 'full' when commander did. */
  path: 'fast' | 'full';
}

const dir = tempDir('sbx-fast-exec-');
const home = join(dir, 'home');
mkdirSync(home);
// Preloaded into every run: records which CLI modules the process loaded (CommonJS cache).
const probe = join(dir, 'probe.cjs');
writeFileSync(
  probe,
  `process.on('exit', () => { const k = Object.keys(require.cache); ` +
    `require('node:fs').writeFileSync(process.env.PROBE_OUT, JSON.stringify({ fast: k.some((f) => ` +
    `f.endsWith('cli-exec.cjs')), commander: k.some((f) => f.includes('/node_modules/commander/')) })); });\n`,
);
let runs = 0;

function runBin(args: string[], opts: { fast: boolean; env?: Record<string, string>; stdin?: string; home?: string }): Promise<Run> {
  const out = join(dir, `probe-${++runs}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', probe, BIN, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: opts.home ?? home,
        PROBE_OUT: out,
        ...(opts.fast ? {} : { SBX_CLI_FAST_PATH: '0' }),
        ...(opts.env ?? {}),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => stdout.push(d));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const probed = JSON.parse(readFileSync(out, 'utf8')) as { fast: boolean; commander: boolean };
      // The full path parses with commander; the fast one must not load it.
      const path = probed.commander ? 'full' : probed.fast ? 'fast' : 'full';
      resolve({ code, stdout: Buffer.concat(stdout), stderr, path });
    });
    child.stdin.end(opts.stdin ?? '');
  });
}

let server: TestServer;
let id: string;
let url: string;

beforeAll(async () => {
  ensureBuilt();
  server = await startTestServer({ auth: { enabled: true, api_key: API_KEY } });
  url = server.url;
  const client = new Client({ url, apiKey: API_KEY });
  id = (await client.spawn({})).id;
  await client.close();
}, 180_000);
afterAll(async () => {
  await server?.close();
});

describe('sbx exec: the fast path and the full CLI', () => {
  it('dist/cli-exec.cjs is built (the fast path exists to be compared)', () => {
    expect(existsSync(join(ROOT, 'dist', 'cli-exec.cjs'))).toBe(true);
  });

  // [name, argv (ID and URL filled in), env, stdin, the path the fast run must take]
  const cases: Array<[string, (id: string, url: string) => string[], Record<string, string>, string | undefined, 'fast' | 'full']> = [
    ['true', (i) => ['exec', i, 'true'], {}, undefined, 'fast'],
    ['exit code and both streams', (i) => ['exec', i, 'sh', '-c', 'echo out; echo err >&2; exit 3'], {}, undefined, 'fast'],
    ['bytes that are not UTF-8', (i) => ['exec', i, '--', 'printf', '\\377\\000ab\\n'], {}, undefined, 'fast'],
    ['command not found (127)', (i) => ['exec', i, 'no-such-command-xyz'], {}, undefined, 'fast'],
    ['--timeout hit (124)', (i) => ['exec', '--timeout', '1s', i, 'sleep', '5'], {}, undefined, 'fast'],
    [
      '-e, -w, --env=, --workdir=',
      (i) => ['exec', '-e', 'A=1', '--env=B=x=y', '-w', '/tmp', i, 'sh', '-c', 'echo $A $B; pwd'],
      {},
      undefined,
      'fast',
    ],
    ['--sh', (i) => ['exec', '--sh', i, 'echo a b | wc -w; exit 4'], {}, undefined, 'fast'],
    ['killed by a signal', (i) => ['exec', i, 'sh', '-c', 'kill -9 $$'], {}, undefined, 'fast'],
    ['options after the id are the command', (i) => ['exec', i, 'echo', '--help', '-i', '--json'], {}, undefined, 'fast'],
    ['id prefix without sb-', (i) => ['exec', i.slice(3, 8), 'echo', 'prefix'], {}, undefined, 'fast'],
    ['unknown sandbox (125)', () => ['exec', 'sb-doesnotexist1', 'true'], {}, undefined, 'fast'],
    ['not a sandbox id (125)', () => ['exec', 'sb-x:/tmp', 'true'], {}, undefined, 'fast'],
    ['no command after the id (125)', (i) => ['exec', i], {}, undefined, 'fast'],
    ['stdin is not read without -i', (i) => ['exec', i, 'cat'], {}, 'local stdin\n', 'fast'],
    ['-i sends stdin (full path)', (i) => ['exec', '-i', i, 'cat'], {}, 'local stdin\n', 'full'],
    ['--json (full path)', (i) => ['exec', '--json', i], {}, undefined, 'full'],
    ['bad -e value (full path)', (i) => ['exec', '-e', 'novalue', i, 'true'], {}, undefined, 'full'],
    ['bad --timeout (full path)', (i) => ['exec', '--timeout', 'soon', i, 'true'], {}, undefined, 'full'],
    ['unknown option (full path)', (i) => ['exec', '--bogus', i, 'true'], {}, undefined, 'full'],
    ['exec --help (full path)', () => ['exec', '--help'], {}, undefined, 'full'],
    ['--url before exec', (i, u) => ['--url', u, 'exec', i, 'true'], { SBX_URL: '' }, undefined, 'fast'],
    ['--url= after exec wins', (i, u) => ['--url', 'http://127.0.0.1:9', 'exec', `--url=${u}`, i, 'echo', 'ok'], {}, undefined, 'fast'],
    ['server unreachable (125)', (i) => ['--url', 'http://127.0.0.1:9', 'exec', i, 'true'], {}, undefined, 'fast'],
    ['invalid server URL (3)', (i) => ['exec', i, 'true'], { SBX_URL: 'ftp://x' }, undefined, 'fast'],
    ['no API key (125)', (i) => ['exec', i, 'true'], { SBX_API_KEY: '' }, undefined, 'fast'],
    ['wrong API key (125)', (i) => ['exec', '--api-key', 'wrong', i, 'true'], {}, undefined, 'fast'],
    ['--no-color and --user', (i) => ['--no-color', 'exec', '--user', 'alice', i, 'echo', 'x'], {}, undefined, 'fast'],
    ['1.3 MB of output in many chunks', (i) => ['exec', i, 'seq', '1', '200000'], {}, undefined, 'fast'],
    ['an API key node:http refuses (125)', (i) => ['exec', '--api-key', 'a\nb', i, 'true'], {}, undefined, 'fast'],
  ];

  it.each(cases)('%s: same stdout, stderr and exit code', async (_name, argv, env, stdin, expected) => {
    const args = argv(id, url);
    const e = { SBX_URL: url, SBX_API_KEY: API_KEY, ...env };
    const full = await runBin(args, { fast: false, env: e, stdin });
    const fast = await runBin(args, { fast: true, env: e, stdin });
    expect(full.path).toBe('full');
    expect(fast.path).toBe(expected);
    expect({ code: fast.code, stderr: fast.stderr, stdout: fast.stdout.toString('base64') }).toEqual({
      code: full.code,
      stderr: full.stderr,
      stdout: full.stdout.toString('base64'),
    });
  });

  it('the matrix covers real outcomes (the paths agree on these values)', async () => {
    const e = { SBX_URL: url, SBX_API_KEY: API_KEY };
    const streams = await runBin(['exec', id, 'sh', '-c', 'echo out; echo err >&2; exit 3'], { fast: true, env: e });
    expect(streams).toMatchObject({ code: 3, stderr: 'err\n', path: 'fast' });
    expect(streams.stdout.toString()).toBe('out\n');
    expect((await runBin(['exec', id, '--', 'printf', '\\377\\000ab'], { fast: true, env: e })).stdout).toEqual(
      Buffer.from([0xff, 0, 0x61, 0x62]),
    );
    const missing = await runBin(['exec', id, 'no-such-command-xyz'], { fast: true, env: e });
    expect(missing).toMatchObject({ code: 127, stderr: 'sbx: command not found: no-such-command-xyz\n' });
    expect((await runBin(['exec', '--timeout', '1s', id, 'sleep', '5'], { fast: true, env: e })).code).toBe(124);
    expect((await runBin(['exec', id, 'sh', '-c', 'kill -9 $$'], { fast: true, env: e })).code).toBe(137);
    const unknown = await runBin(['exec', 'sb-doesnotexist1', 'true'], { fast: true, env: e });
    expect(unknown).toMatchObject({ code: 125, stderr: 'sbx: sandbox sb-doesnotexist1 not found\n' });
    const keyless = await runBin(['exec', id, 'true'], { fast: true, env: { SBX_URL: url } });
    expect(keyless.code).toBe(125);
    expect(keyless.stderr).toMatch(/^sbx: an API key is required: .*\(pass --api-key or set SBX_API_KEY\)\n$/);
    const down = await runBin(['exec', id, 'true'], { fast: true, env: { SBX_URL: 'http://127.0.0.1:9' } });
    expect(down).toMatchObject({
      code: 125,
      stderr: 'sbx: cannot reach sbx server at http://127.0.0.1:9: connection refused (ECONNREFUSED)\n',
    });
  });

  it('reads the client profile as the full CLI does (url and api_key from ~/.sbx/client.yaml; a bad one exits 3)', async () => {
    const profiled = join(dir, 'profiled');
    mkdirSync(join(profiled, '.sbx'), { recursive: true });
    writeFileSync(join(profiled, '.sbx', 'client.yaml'), `url: ${url}\napi_key: ${API_KEY}\n`);
    for (const fast of [true, false]) {
      const r = await runBin(['exec', id, 'echo', 'from-profile'], { fast, home: profiled });
      expect(r).toMatchObject({ code: 0, stderr: '', path: fast ? 'fast' : 'full' });
      expect(r.stdout.toString()).toBe('from-profile\n');
    }
    const broken = join(dir, 'broken');
    mkdirSync(join(broken, '.sbx'), { recursive: true });
    writeFileSync(join(broken, '.sbx', 'client.yaml'), 'colour: blue\n');
    const [fast, full] = [
      await runBin(['exec', id, 'true'], { fast: true, home: broken }),
      await runBin(['exec', id, 'true'], { fast: false, home: broken }),
    ];
    expect(fast).toMatchObject({ code: 3, path: 'fast' });
    expect(fast.stderr).toContain('unknown key "colour"');
    expect([fast.code, fast.stderr]).toEqual([full.code, full.stderr]);
  });

  it('piped into a slow reader, the output arrives whole on both paths (`sbx exec ID cat big | wc -c`)', async () => {
    for (const fast of [true, false]) {
      const shell = spawn(
        'sh',
        ['-c', `"$NODE" "$BIN" exec "$ID" -- sh -c 'head -c 12000000 /dev/zero; echo; exit 5' | (sleep 1; wc -c)`],
        {
          env: {
            PATH: process.env.PATH ?? '',
            HOME: home,
            SBX_URL: url,
            SBX_API_KEY: API_KEY,
            NODE: process.execPath,
            BIN,
            ID: id,
            ...(fast ? {} : { SBX_CLI_FAST_PATH: '0' }),
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((resolve) => shell.on('close', resolve));
      expect(code).toBe(0);
      expect(out.trim()).toBe('12000001');
    }
  });

  it('Ctrl-C while the command runs: exit 130 on both paths', async () => {
    for (const fast of [true, false]) {
      const child = spawn(process.execPath, [BIN, 'exec', id, 'sh', '-c', 'echo started; sleep 30'], {
        env: { PATH: process.env.PATH ?? '', HOME: home, SBX_URL: url, SBX_API_KEY: API_KEY, ...(fast ? {} : { SBX_CLI_FAST_PATH: '0' }) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      await new Promise<void>((resolve) =>
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('started')) resolve();
        }),
      );
      child.kill('SIGINT');
      const [code] = (await once(child, 'close')) as [number | null];
      expect({ fast, code, out, stderr }).toEqual({ fast, code: 130, out: 'started\n', stderr: '' });
    }
  });

  it('the code cache: written after a run, then used as is; one of another bundle or a broken one is ignored and replaced', async () => {
    const bundle = join(ROOT, 'dist', 'cli-exec.cjs');
    const cache = `${bundle}.cache`;
    const e = { SBX_URL: url, SBX_API_KEY: API_KEY };
    const header = () => {
      const st = statSync(bundle);
      return `${st.size}:${st.mtimeMs}:${st.ino}\n`;
    };
    const run = async () => {
      const r = await runBin(['exec', id, 'echo', 'cached'], { fast: true, env: e });
      expect({ code: r.code, out: r.stdout.toString(), path: r.path }).toEqual({ code: 0, out: 'cached\n', path: 'fast' });
    };
    rmSync(cache, { force: true });
    await run();
    const written = readFileSync(cache);
    expect(written.subarray(0, header().length).toString()).toBe(header());
    expect(written.length).toBeGreaterThan(header().length + 1000);
    // Accepted: not written again.
    const mtime = statSync(cache).mtimeMs;
    await run();
    expect(statSync(cache).mtimeMs).toBe(mtime);
    // Broken data under the right header (V8 rejects it), and valid data of another bundle file: both replaced.
    for (const stale of [Buffer.concat([Buffer.from(header()), Buffer.alloc(5000, 7)]), Buffer.concat([Buffer.from('1:2:3\n'), written])]) {
      writeFileSync(cache, stale);
      await run();
      const now = readFileSync(cache);
      expect(now.equals(stale)).toBe(false);
      expect(now.subarray(0, header().length).toString()).toBe(header());
    }
  });
});
