import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { CommandExitError, NotFoundError, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { envdSdkFor, type EnvdSdk } from '../helpers/e2b-sdk.js';
import { UPGRADE_ECHO } from '../helpers/preview.js';
import { ensureE2bImage } from './e2b-image.js';
import { DOCKER_SKIP, dockerTitle, requireEngine } from './engine.js';

const KEY = 'e2b_00112233445566778899aabbccddeeff00112233';

/**
 * E2B's SDK commands and files on real containers (DESIGN.md §14): `/bin/bash -l -c CMD` as the
 * image's `user`, in its home, with the sandbox's env; files through the engine; a terminal.
 */
describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('E2B SDK envd plane on docker'), () => {
  let docker: Docker;
  let dir: string;
  let srv: TestServer;
  const requested: string[] = [];
  let sdk: EnvdSdk;
  let sbx: Sandbox;

  beforeAll(async () => {
    docker = await requireEngine();
    const image = await ensureE2bImage(docker);
    dir = mkdtempSync(join(tmpdir(), 'sbx-docker-envd-'));
    srv = await startTestServer({
      providers: { default: 'docker' },
      defaults: { image, memory_mb: 128 },
      database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
      auth: { enabled: true, api_key: KEY },
    });
    sdk = envdSdkFor(srv.url, requested, KEY);
    sbx = await Sandbox.create({ ...sdk, envs: { GREETING: 'hello-docker' }, timeoutMs: 300_000 });
  }, 180_000);
  afterAll(async () => {
    await sbx?.kill().catch(() => undefined);
    await srv?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b/`)).toBe(true);
  });

  it('runs /bin/bash -l -c as user in /home/user with the sandbox env; exit codes', async () => {
    const r = await sbx.commands.run('echo hi; id -u; pwd; echo "$GREETING $HOME"');
    expect(r.stdout).toBe('hi\n1000\n/home/user\nhello-docker /home/user\n');
    const root = await sbx.commands.run('id -u', { user: 'root' });
    expect(root.stdout).toBe('0\n');
    const err = await sbx.commands.run('echo nope >&2; exit 5').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect((err as CommandExitError).exitCode).toBe(5);
    expect((err as CommandExitError).stderr).toBe('nope\n');
  }, 60_000);

  it('streams: the first chunk arrives before the command ends', async () => {
    const seen: number[] = [];
    const t0 = Date.now();
    await sbx.commands.run('echo one; sleep 1; echo two', { onStdout: () => void seen.push(Date.now() - t0) });
    expect(Date.now() - t0 - seen[0]!).toBeGreaterThan(700);
  }, 60_000);

  it('background, list, connect, stdin, kill', async () => {
    const h = await sbx.commands.run('while read l; do echo "echo:$l"; done', { background: true, stdin: true });
    expect((await sbx.commands.list()).map((p) => p.pid)).toContain(h.pid);
    const c = await sbx.commands.connect(h.pid);
    await sbx.commands.sendStdin(h.pid, 'ping\n');
    const until = Date.now() + 10_000;
    while (!c.stdout.includes('echo:ping') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(c.stdout).toBe('echo:ping\n');
    expect(await h.kill()).toBe(true);
    await expect(h.wait()).rejects.toBeInstanceOf(CommandExitError);
  }, 60_000);

  it('a terminal: pty.create runs bash in a pty of that size', async () => {
    let out = '';
    const term = await sbx.pty.create({ cols: 90, rows: 20, onData: (d) => void (out += Buffer.from(d).toString()) });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; exit\n'));
    await term.wait().catch(() => undefined);
    expect(out).toContain('20 90');
  }, 60_000);

  it('files: text and 1 MiB bytes, relative paths under the home, several at once, list, rename, remove', async () => {
    await sbx.files.write('notes/a.txt', 'in home');
    expect(await sbx.files.read('/home/user/notes/a.txt')).toBe('in home');
    expect((await sbx.commands.run('cat notes/a.txt')).stdout).toBe('in home');
    const bytes = new Uint8Array(1024 * 1024).map((_, i) => (i * 13) & 0xff);
    await sbx.files.write('/tmp/big.bin', bytes.buffer);
    expect(Buffer.from(await sbx.files.read('/tmp/big.bin', { format: 'bytes' })).equals(Buffer.from(bytes))).toBe(true);
    await sbx.files.write([
      { path: '/tmp/m/1.txt', data: 'one' },
      { path: '/tmp/m/2.txt', data: 'two' },
    ]);
    expect((await sbx.commands.run('cat /tmp/m/1.txt /tmp/m/2.txt')).stdout).toBe('onetwo');
    expect(await sbx.files.makeDir('/tmp/d/e')).toBe(true);
    expect((await sbx.files.list('/tmp/d')).map((e) => e.name)).toEqual(['e']);
    await sbx.files.rename('/tmp/m/1.txt', '/tmp/d/1.txt');
    expect(await sbx.files.exists('/tmp/m/1.txt')).toBe(false);
    expect((await sbx.files.getInfo('/tmp/d/1.txt')).size).toBe(3);
    await sbx.files.remove('/tmp/d');
    await expect(sbx.files.read('/tmp/d/1.txt')).rejects.toBeInstanceOf(NotFoundError);
  }, 60_000);

  it('files are the calling user’s: the file and the directories the write made; root’s when asked; no symlink followed', async () => {
    const owner = async (path: string) => (await sbx.commands.run(`stat -c %U:%G ${path}`, { user: 'root' })).stdout.trim();
    await sbx.files.write('owned/deep/f.txt', 'mine');
    expect(await owner('/home/user/owned')).toBe('user:user');
    expect(await owner('/home/user/owned/deep')).toBe('user:user');
    expect(await owner('/home/user/owned/deep/f.txt')).toBe('user:user');
    // The user's commands can change what it wrote, as on E2B.
    await sbx.commands.run('echo more >> owned/deep/f.txt');
    expect(await sbx.files.read('owned/deep/f.txt')).toBe('minemore\n');
    // Several files in one multipart upload; a world-writable sticky directory (/tmp).
    await sbx.files.write([
      { path: '/tmp/own/1.txt', data: 'one' },
      { path: '/tmp/own/2.txt', data: 'two' },
    ]);
    expect(await owner('/tmp/own')).toBe('user:user');
    expect(await owner('/tmp/own/2.txt')).toBe('user:user');
    expect(await sbx.files.makeDir('/home/user/made/a')).toBe(true);
    expect(await owner('/home/user/made')).toBe('user:user');
    expect(await owner('/home/user/made/a')).toBe('user:user');
    // Asked as root: root's. Where the user may not write (root's /etc), the user's write is refused, as on E2B.
    await sbx.files.write('/tmp/rootfile.txt', 'r', { user: 'root' });
    expect(await owner('/tmp/rootfile.txt')).toBe('root:root');
    await expect(sbx.files.write('/etc/sbx-e2b.conf', 'x')).rejects.toThrow(/permission denied/);
    await expect(sbx.files.makeDir('/etc/sbx-e2b-dir')).rejects.toThrow(/permission denied/);
    // A symlink in the path (made by code in the sandbox) to a root directory gives the user nothing there.
    await sbx.commands.run('ln -s /etc /home/user/etc-link');
    await expect(sbx.files.write('/home/user/etc-link/via-link.txt', 'x')).rejects.toThrow(/permission denied/);
    expect((await sbx.commands.run('ls /etc/via-link.txt /etc/sbx-e2b.conf 2>&1 || true', { user: 'root' })).stdout).toMatch(
      /No such file[\s\S]*No such file/,
    );
  }, 60_000);

  it('a WebSocket (any upgrade) to a sandbox port through E2b-Sandbox-Port, with the access token', async () => {
    await sbx.files.write('/tmp/up.sh', UPGRADE_ECHO, { user: 'root' });
    await sbx.commands.run('chmod 755 /tmp/up.sh', { user: 'root' });
    const server = await sbx.commands.run('busybox nc -ll -p 9090 -e /tmp/up.sh', { background: true, user: 'root' });
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    expect(token).toMatch(/\S{16,}/);
    const headers = { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '9090', 'x-access-token': token };
    const payload = randomBytes(64 * 1024);
    const deadline = Date.now() + 15_000;
    let r = await rawUpgrade(srv.url, '/e2b/sandbox/ws', headers, payload);
    while (!r.head.startsWith('HTTP/1.1 101') && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
      r = await rawUpgrade(srv.url, '/e2b/sandbox/ws', headers, payload);
    }
    expect(r.head).toMatch(/^HTTP\/1\.1 101/);
    expect(r.echoed.subarray(0, payload.length).equals(payload)).toBe(true);
    // Without the token, or to envd's own port: refused before anything reaches the sandbox.
    const bad = await rawUpgrade(srv.url, '/e2b/sandbox/ws', { ...headers, 'x-access-token': 'wrong' }, payload);
    expect(bad.head).toMatch(/^HTTP\/1\.1 401/);
    const envd = await rawUpgrade(srv.url, '/e2b/sandbox/ws', { ...headers, 'e2b-sandbox-port': '49983' }, payload);
    expect(envd.head).toMatch(/^HTTP\/1\.1 404/);
    await server.kill();
  }, 60_000);
});

/** An upgrade request on a raw socket: the answer's head, then what the other side echoes of `payload`. */
function rawUpgrade(
  base: string,
  path: string,
  headers: Record<string, string>,
  payload: Buffer,
): Promise<{ head: string; echoed: Buffer }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    let head: string | null = null;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`upgrade timed out (head: ${head}, ${buf.length} bytes)`));
    }, 20_000);
    const done = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ head: head ?? '', echoed: buf });
    };
    sock.on('connect', () => {
      let text = `GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n`;
      for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
      sock.write(`${text}\r\n`);
    });
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (head === null) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString('latin1');
        buf = buf.subarray(end + 4);
        if (!head.startsWith('HTTP/1.1 101')) return done();
        sock.write(payload);
      }
      if (buf.length >= payload.length) done();
    });
    sock.on('end', () => head !== null && done());
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
