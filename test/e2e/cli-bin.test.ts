import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { BIN, ensureBuilt, ROOT } from './build.js';

interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** An empty HOME: no client profile, and nothing the bin might write lands in a shared directory. */
const home = tempDir('sbx-bin-home-');

/** Runs the built bin as a child process (async: the test server lives in this process). */
function runBin(args: string[], opts: { env?: Record<string, string>; stdin?: string; nodeArgs?: string[] } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: home, ...(opts.env ?? {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    child.stdin.end(opts.stdin ?? '');
  });
}

const HEAVY = /\/node_modules\/(fastify|@fastify\/websocket|better-sqlite3|dockerode|ink|react|pg|pino|undici|eventsource|ws)\//;

/** Module URLs the bin loads for `args`, recorded by a module.register resolve hook. */
async function loadedModules(args: string[], env: Record<string, string> = {}): Promise<string[]> {
  const dir = tempDir('sbx-modules-');
  const log = join(dir, 'modules.log');
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';\nexport async function resolve(specifier, context, next) {\n  ` +
      `const r = await next(specifier, context);\n  appendFileSync(${JSON.stringify(log)}, r.url + '\\n');\n  return r;\n}\n`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  writeFileSync(log, '');
  const r = await runBin(args, { env, nodeArgs: ['--import', pathToFileURL(register).href] });
  expect(r.code).toBe(0);
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

let server: TestServer;

beforeAll(async () => {
  ensureBuilt();
  server = await startTestServer();
}, 180_000);
afterAll(async () => {
  await server?.close();
});

describe('built bin/sbx.js', () => {
  it('--version prints the package version and exits 0', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await runBin(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toBe(`${pkg.version}\n`);
    expect(r.stderr).toBe('');
  });

  it.each([[['--version']], [['exec', '--help']]])('start-up budget: `sbx %s` loads no server, HTTP or UI modules', async (args) => {
    const urls = await loadedModules(args);
    // `--version` is answered by the bin shim itself; everything else goes through dist/cli.js.
    expect(urls.some((u) => u.endsWith('/dist/cli.js'))).toBe(args[0] !== '--version');
    expect(urls.filter((u) => HEAVY.test(u))).toEqual([]);
    expect(urls.filter((u) => /\/dist\/(compose|adapters|config|transports\/http)\//.test(u))).toEqual([]);
  });

  it('runs exec against a real server: exit code, stdout and stderr apart, stdin piped', async () => {
    const env = { SBX_URL: server.url };
    const spawned = await runBin(['spawn'], { env });
    expect(spawned.code).toBe(0);
    const id = spawned.stdout.toString().trim();
    expect(id).toMatch(/^sb[-_]\w+$/);
    const r = await runBin(['exec', '-i', id, '--', 'sh', '-c', 'cat; echo to-err >&2; exit 7'], { env, stdin: 'from stdin\n' });
    expect(r.code).toBe(7);
    expect(r.stdout.toString()).toBe('from stdin\n');
    expect(r.stderr).toBe('to-err\n');
    const timeout = await runBin(['exec', '--timeout', '1s', id, '--', 'sleep', '5'], { env });
    expect(timeout.code).toBe(124);
    // The request itself goes through Node's own http: no HTTP library, no server module (issue 33).
    const urls = await loadedModules(['exec', id, '--', 'true'], env);
    expect(urls.filter((u) => HEAVY.test(u))).toEqual([]);
  });

  it('exits as soon as its output is flushed, and a slow pipe still gets every byte (issue 33)', async () => {
    const env = { SBX_URL: server.url };
    const id = (await runBin(['spawn'], { env })).stdout.toString().trim();
    // The reader starts a second late: the CLI must not leave before the pipe has taken everything.
    const shell = spawn('sh', ['-c', `"$NODE" "$BIN" exec "$ID" -- sh -c 'head -c 8000000 /dev/zero; echo; exit 3' | (sleep 1; wc -c)`], {
      env: { PATH: process.env.PATH ?? '', HOME: home, SBX_URL: server.url, NODE: process.execPath, BIN, ID: id },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    shell.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => shell.on('close', resolve));
    expect(code).toBe(0);
    expect(out.trim()).toBe('8000001');
    // The command's own exit code comes through a pipe too (pipefail-free: run it alone).
    expect((await runBin(['exec', id, '--', 'sh', '-c', 'exit 3'], { env })).code).toBe(3);
  });

  it('an unreachable server exits 6 and names the URL', async () => {
    const r = await runBin(['ls'], { env: { SBX_URL: 'http://127.0.0.1:9' } });
    expect(r.code).toBe(6);
    expect(r.stderr).toBe('sbx: cannot reach sbx server at http://127.0.0.1:9: connection refused (ECONNREFUSED)\n');
  });

  it('usage errors exit 2', async () => {
    const r = await runBin(['spwn']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Did you mean spawn?');
  });
});
