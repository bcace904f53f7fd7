import { request as httpRequest } from 'node:http';
import { AuthenticationError, CommandExitError, NotFoundError, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envdSdkFor, type EnvdSdk } from '../helpers/e2b-sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * E2B's envd plane (DESIGN.md §14) driven by E2B's own JS SDK (the `e2b` package, unmodified)
 * against a real server on a real port (mock provider): commands through sbx's processes, files
 * through its file API, under `/e2b/sandbox` (E2B_SANDBOX_URL mode). Every request the SDK makes
 * is logged through its `logger` option and must go to this server, never to E2B's public hosts.
 */
const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

describe('E2B SDK commands and files through the envd plane (mock)', () => {
  let srv: TestServer;
  const requested: string[] = [];
  let sdk: EnvdSdk;
  let sbx: Sandbox;
  beforeAll(async () => {
    srv = await startTestServer();
    sdk = envdSdkFor(srv.url, requested);
    sbx = await Sandbox.create({ ...sdk, envs: { GREETING: 'from-create' }, timeoutMs: 300_000 });
  });
  afterAll(async () => {
    await sbx?.kill().catch(() => undefined);
    await srv.close();
    expect(requested.some((u) => u.includes('/e2b/sandbox/process.Process/Start'))).toBe(true);
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b/`)).toBe(true);
  });

  it('runs a command: stdout, exit code, and the create answer envVars', async () => {
    const r = await sbx.commands.run('echo hi; echo "$GREETING"; echo err >&2');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('hi\nfrom-create\n');
    expect(r.stderr).toBe('err\n');
    const withEnv = await sbx.commands.run('echo "$A-$GREETING"', { envs: { A: 'b' } });
    expect(withEnv.stdout).toBe('b-from-create\n');
  });

  it('a non-zero exit raises CommandExitError with the output', async () => {
    const err = await sbx.commands.run('echo out; exit 3').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect((err as CommandExitError).exitCode).toBe(3);
    expect((err as CommandExitError).stdout).toBe('out\n');
  });

  it('streams output to onStdout as it is written', async () => {
    const seen: Array<{ at: number; data: string }> = [];
    const t0 = Date.now();
    const r = await sbx.commands.run('echo first; sleep 1; echo second', {
      onStdout: (d) => void seen.push({ at: Date.now() - t0, data: d }),
    });
    const ended = Date.now() - t0;
    expect(r.stdout).toBe('first\nsecond\n');
    expect(seen[0]!.data).toBe('first\n');
    // The first chunk arrived while the command still slept.
    expect(ended - seen[0]!.at).toBeGreaterThan(700);
  });

  it('background commands: list, connect, stdin, kill', async () => {
    const h = await sbx.commands.run('read line; echo "got $line"; sleep 60', { background: true, stdin: true });
    const listed = await sbx.commands.list();
    expect(listed.map((p) => p.pid)).toContain(h.pid);
    expect(listed.find((p) => p.pid === h.pid)).toMatchObject({
      cmd: '/bin/bash',
      args: ['-l', '-c', 'read line; echo "got $line"; sleep 60'],
    });

    const again = await sbx.commands.connect(h.pid);
    await sbx.commands.sendStdin(h.pid, 'hello\n');
    const deadline = Date.now() + 10_000;
    while (!again.stdout.includes('got hello') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(again.stdout).toBe('got hello\n');

    expect(await sbx.commands.kill(h.pid)).toBe(true);
    const err = await h.wait().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect((await sbx.commands.list()).map((p) => p.pid)).not.toContain(h.pid);
    expect(await sbx.commands.kill(h.pid)).toBe(false);
  });

  it('closeStdin ends the input of a command started with stdin', async () => {
    const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true });
    await h.sendStdin('abc');
    await h.closeStdin();
    const r = await h.wait();
    expect(r.stdout).toBe('abcdone\n');
  });

  it('files: write and read text and 1 MiB of bytes, list, makeDir, rename, remove, exists, getInfo', async () => {
    const info = await sbx.files.write('/workspace/a.txt', 'hello files');
    expect(info).toMatchObject({ name: 'a.txt', path: '/workspace/a.txt', type: 'file' });
    expect(await sbx.files.read('/workspace/a.txt')).toBe('hello files');

    const bytes = new Uint8Array(1024 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff;
    await sbx.files.write('/workspace/bin/data.bin', bytes.buffer);
    const back = await sbx.files.read('/workspace/bin/data.bin', { format: 'bytes' });
    expect(Buffer.from(back).equals(Buffer.from(bytes))).toBe(true);

    expect(await sbx.files.makeDir('/workspace/d/e')).toBe(true);
    expect(await sbx.files.makeDir('/workspace/d/e')).toBe(false);
    const moved = await sbx.files.rename('/workspace/a.txt', '/workspace/d/b.txt');
    expect(moved).toMatchObject({ name: 'b.txt', path: '/workspace/d/b.txt', type: 'file' });
    expect(await sbx.files.exists('/workspace/a.txt')).toBe(false);
    expect(await sbx.files.exists('/workspace/d/b.txt')).toBe(true);

    const stat = await sbx.files.getInfo('/workspace/bin/data.bin');
    expect(stat).toMatchObject({ name: 'data.bin', type: 'file', size: 1024 * 1024 });
    expect(stat.modifiedTime).toBeInstanceOf(Date);
    expect((await sbx.files.getInfo('/workspace/d')).type).toBe('dir');

    const top = await sbx.files.list('/workspace/d');
    expect(top.map((e) => [e.name, e.type])).toEqual([
      ['b.txt', 'file'],
      ['e', 'dir'],
    ]);
    const deep = await sbx.files.list('/workspace', { depth: 2 });
    expect(deep.map((e) => e.path)).toEqual(
      expect.arrayContaining(['/workspace/d', '/workspace/d/b.txt', '/workspace/d/e', '/workspace/bin/data.bin']),
    );

    await sbx.files.remove('/workspace/d');
    expect(await sbx.files.exists('/workspace/d')).toBe(false);
    await expect(sbx.files.read('/workspace/d/b.txt')).rejects.toBeInstanceOf(NotFoundError);
    // What a command wrote, the file API reads (one sandbox, one filesystem; mock runs commands in /workspace).
    await sbx.commands.run('printf made-by-cmd > c.txt');
    expect(await sbx.files.read('/workspace/c.txt')).toBe('made-by-cmd');
  });

  it('writes several files at once', async () => {
    const out = await sbx.files.write([
      { path: '/workspace/m/one.txt', data: 'one' },
      { path: '/workspace/m/two.txt', data: new Blob(['two']) },
    ]);
    expect(out.map((f) => f.path)).toEqual(['/workspace/m/one.txt', '/workspace/m/two.txt']);
    expect(await sbx.files.read('/workspace/m/two.txt')).toBe('two');
    const r = await sbx.commands.run('cat m/one.txt m/two.txt');
    expect(r.stdout).toBe('onetwo');
  });

  it('a sandbox that is gone raises NotFoundError', async () => {
    const other = await Sandbox.create({ ...sdk, timeoutMs: 60_000 });
    await fetch(`${srv.url}/api/v1/sandboxes/${other.sandboxId}`, { method: 'DELETE' });
    await expect(other.commands.run('true')).rejects.toBeInstanceOf(NotFoundError);
    await expect(other.files.read('/workspace/x')).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('E2B SDK through the envd plane with auth on', () => {
  let srv: TestServer;
  const requested: string[] = [];
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: KEY } });
  });
  afterAll(async () => {
    await srv.close();
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b/`)).toBe(true);
  });

  it('the envd access token is required: a wrong one raises AuthenticationError, the right one works', async () => {
    const sdk = envdSdkFor(srv.url, requested);
    const sbx = await Sandbox.create({ ...sdk, timeoutMs: 60_000 });
    expect((await sbx.commands.run('echo ok')).stdout).toBe('ok\n');
    await sbx.files.write('/workspace/s.txt', 'secret-ish');

    const other = await Sandbox.connect(sbx.sandboxId, sdk);
    (other as unknown as { envdAccessToken: string }).envdAccessToken = 'wrong-token';
    await expect(other.commands.run('true')).rejects.toBeInstanceOf(AuthenticationError);
    await expect(other.files.exists('/workspace')).rejects.toBeInstanceOf(AuthenticationError);
    // No token at all, and an API key is no envd credential.
    const raw = await fetch(`${srv.url}/e2b/sandbox/files?path=/workspace/s.txt`, {
      headers: { 'e2b-sandbox-id': sbx.sandboxId, 'x-api-key': KEY },
    });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toMatchObject({ code: 401 });

    // E2B's signed URL (SHA-256 over path, operation, user, token, expiry) is a credential too.
    const url = new URL(await sbx.downloadUrl('/workspace/s.txt', { useSignatureExpiration: 60 }));
    const signed = await fetch(`${srv.url}/e2b/sandbox/files${url.search}`, { headers: { 'e2b-sandbox-id': sbx.sandboxId } });
    expect(signed.status).toBe(200);
    expect(await signed.text()).toBe('secret-ish');
    url.searchParams.set('path', '/workspace/other.txt');
    const forged = await fetch(`${srv.url}/e2b/sandbox/files${url.search}`, { headers: { 'e2b-sandbox-id': sbx.sandboxId } });
    expect(forged.status).toBe(401);

    // A sandbox made through the native API has no envd token: this plane does not open it.
    const native = await fetch(`${srv.url}/api/v1/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: '{}',
    });
    const nid = ((await native.json()) as { id: string }).id;
    const open = await fetch(`${srv.url}/e2b/sandbox/files?path=/workspace`, { headers: { 'e2b-sandbox-id': nid } });
    expect(open.status).toBe(401);
    await sbx.kill();
  });
});

/** A raw HTTP/1.1 request with a chosen Host (fetch cannot set one). */
function hostRequest(url: string, host: string, method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const u = new URL(url);
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: { host, ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('the envd plane by Host (49983-<id>.<preview_domain>) and other ports by E2b-Sandbox-Port', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ server: { preview_domain: 'sbx.test' } });
  });
  afterAll(async () => srv?.close());

  it('serves Connect calls and /files on the envd host, and forwards another port to the sandbox', async () => {
    const sbx = await Sandbox.create({ ...envdSdkFor(srv.url, []), timeoutMs: 60_000 });
    await sbx.files.write('/workspace/h.txt', 'by host');
    const host = `49983-${sbx.sandboxId}.sbx.test`;
    const listed = await hostRequest(srv.url, host, 'POST', '/process.Process/List', '{}', { 'connect-protocol-version': '1' });
    expect(listed).toEqual({ status: 200, text: '{}' });
    const stat = await hostRequest(srv.url, host, 'POST', '/filesystem.Filesystem/Stat', '{"path":"/workspace/h.txt"}');
    expect(JSON.parse(stat.text)).toMatchObject({ entry: { name: 'h.txt', type: 'FILE_TYPE_FILE', size: '7' } });
    expect(await hostRequest(srv.url, host, 'GET', '/files?path=/workspace/h.txt')).toEqual({ status: 200, text: 'by host' });
    // A header naming another sandbox does not redirect a Host-routed call.
    const other = await hostRequest(srv.url, host, 'GET', '/files?path=/workspace/h.txt', undefined, { 'e2b-sandbox-id': 'sb-other' });
    expect(other.text).toBe('by host');
    // Another port of the sandbox: the §9 preview upstream (nothing listens there → 502).
    const port = await fetch(`${srv.url}/e2b/sandbox/`, { headers: { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '1' } });
    expect(port.status).toBe(502);
    expect(((await port.json()) as { code: string }).code).toBe('bad_gateway');
    const health = await fetch(`${srv.url}/e2b/sandbox/health`, { headers: { 'e2b-sandbox-id': sbx.sandboxId } });
    expect(health.status).toBe(204);
    await sbx.kill();
    expect((await fetch(`${srv.url}/e2b/sandbox/health`, { headers: { 'e2b-sandbox-id': sbx.sandboxId } })).status).toBe(502);
  });
});
