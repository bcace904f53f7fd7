/**
 * Small CLI behaviours: an unknown provider under --test, proxies answering 502/503/504, a broken
 * client profile, and the man page naming only commands that exist.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, SbxError } from '../../src/index.js';
import { manPage } from '../../src/transports/cli/docs/man.js';
import { docFiles } from '../../src/transports/cli/docs/files.js';
import { GLOBAL_OPTIONS } from '../../src/transports/cli/program.js';
import { COMMANDS } from '../../src/transports/cli/registry.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runSbx, sbxAt } from './run-sbx.js';
import { tempDir } from '../helpers/tmp.js';

describe('sbx providers NAME --test', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server?.close());

  it('an unknown provider is not found (exit 4), like `sbx providers NAME`', async () => {
    const sbx = sbxAt(server.url);
    const plain = await sbx(['providers', 'nope']);
    for (const argv of [
      ['providers', 'nope', '--test'],
      ['providers', 'nope', '--test', '--json'],
    ]) {
      const r = await sbx(argv);
      expect(r.code, argv.join(' ')).toBe(4);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe('sbx: provider "nope" is not configured (available: mock)\n');
    }
    expect(plain.code).toBe(4);
    expect(plain.stderr).toBe('sbx: provider "nope" is not configured (available: mock)\n');
    const known = await sbx(['providers', 'mock', '--test', '--json']);
    expect(known.code).toBe(0);
    expect(JSON.parse(known.stdout)).toEqual({ mock: true });
  });
});

describe('a proxy that cannot reach the server', () => {
  let proxy: Server;
  let url: string;
  const answers: Record<string, { status: number; type?: string; body: string }> = {
    '/502': { status: 502, type: 'text/html', body: '<html><body>Bad Gateway</body></html>' },
    '/504': { status: 504, type: 'text/html', body: '<html>Gateway Time-out</html>' },
    '/503': { status: 503, body: '' },
    '/503-json': { status: 503, type: 'application/json', body: '{"message":"upstream down"}' },
    '/503-sbx': {
      status: 503,
      type: 'application/json',
      body: '{"code":"unavailable","message":"sandbox capacity reached (max_sandboxes 2)"}',
    },
  };
  beforeAll(async () => {
    proxy = createServer((req, res) => {
      const a = answers[`/${(req.url ?? '').split('/')[1]}`] ?? { status: 500, body: '' };
      res.writeHead(a.status, a.type ? { 'content-type': a.type } : {});
      res.end(a.body);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise<void>((resolve) => proxy.close(() => resolve())));

  it('502 and 504, and 503 without an sbx error body: unavailable, exit 6, naming the URL', async () => {
    for (const [prefix, what] of [
      ['/502', 'unreachable (HTTP 502 Bad Gateway from a proxy in front of it)'],
      ['/504', 'unreachable (HTTP 504 Gateway Timeout from a proxy in front of it)'],
      ['/503', 'unavailable (HTTP 503 Service Unavailable)'],
      ['/503-json', 'unavailable (HTTP 503 Service Unavailable)'],
    ] as const) {
      const r = await runSbx(['ls'], { env: { SBX_URL: `${url}${prefix}` } });
      expect(r.code, prefix).toBe(6);
      expect(r.stderr).toBe(`sbx: sbx server at ${url}${prefix} is ${what} for GET /api/v1/sandboxes\n`);
      const err = await new Client({ url: `${url}${prefix}` }).list().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SbxError);
      expect(err).toMatchObject({ code: 'unavailable', details: { status: Number(prefix.slice(1, 4)), url: `${url}${prefix}` } });
    }
  });

  it('an sbx 503 error body keeps its own message', async () => {
    const r = await runSbx(['ls'], { env: { SBX_URL: `${url}/503-sbx` } });
    expect(r.code).toBe(6);
    expect(r.stderr).toBe('sbx: sandbox capacity reached (max_sandboxes 2)\n');
  });

  it('the event stream through such a proxy: exit 6 naming the URL', async () => {
    const r = await runSbx(['watch'], { env: { SBX_URL: `${url}/502` } });
    expect(r.code).toBe(6);
    expect(r.stderr).toContain(`sbx server at ${url}/502 is unreachable`);
  });
});

describe('a broken ~/.sbx/client.yaml', () => {
  const profile = (text: string) => {
    const home = tempDir('sbx-profile-');
    mkdirSync(join(home, '.sbx'));
    writeFileSync(join(home, '.sbx', 'client.yaml'), text);
    return { home, path: join(home, '.sbx', 'client.yaml') };
  };

  it('gives the whole reason on one line with the file path, exit 3', async () => {
    const { home, path } = profile('url: a: b\n');
    const r = await runSbx(['ls'], { env: { HOME: home } });
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`sbx: ${path} is not valid YAML: line 1, column 6: Nested mappings are not allowed in compact mappings\n`);
  });

  it('never echoes the file content (a key may be on the broken line)', async () => {
    const { home, path } = profile('url: http://127.0.0.1:1\napi_key: "sekrit-profile-key-123\n');
    const r = await runSbx(['ls'], { env: { HOME: home } });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`^sbx: ${path.replace(/[.]/g, '\\.')} is not valid YAML: line \\d+, column \\d+: \\S.*[^:]\\n$`));
    expect(r.stderr).not.toContain('sekrit');
  });
});

describe('the man page', () => {
  it('names the commands that exist: `sbx worker` now runs a remote worker', () => {
    const man = docFiles()['man/sbx.1']!;
    expect(COMMANDS.some((c) => c.name === 'worker')).toBe(true);
    expect(man).toContain('`sbx worker` runs a remote worker, and the other commands');
    expect(man).toMatch(/\.SS "sbx worker \[options\]/);
  });

  it('follows the command tree: every command with --config is listed for SBX_CONFIG', () => {
    const man = manPage(COMMANDS, GLOBAL_OPTIONS, '0.0.0');
    expect(man).toContain(
      'server configuration file for doctor, serve, worker, worker token mint, worker token verify, provider\\-server and config lint (as',
    );
    const extra = {
      name: 'zz',
      summary: 'a test command',
      options: [{ flags: '-c, --config <file>', description: 'config file' }],
      run: async () => 0,
    };
    expect(manPage([...COMMANDS, extra], GLOBAL_OPTIONS, '0.0.0')).toContain('config lint and zz (as');
  });
});
