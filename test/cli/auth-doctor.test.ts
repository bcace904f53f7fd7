import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runSbx, sbxAt } from './run-sbx.js';
import { tempDir } from '../helpers/tmp.js';

const API_KEY = 'k'.repeat(40);
const ADMIN_KEY = 'a'.repeat(40);
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY } });
});
afterAll(async () => {
  await server?.close();
});

describe('auth', () => {
  it('a missing API key says which flag or variable to set', async () => {
    const r = await sbxAt(server.url)(['ls']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^sbx: an API key is required: .*\(pass --api-key or set SBX_API_KEY\)\n$/);
    expect(r.stderr).not.toContain(API_KEY);
  });

  it('a wrong key is reported as rejected, without echoing it', async () => {
    const r = await sbxAt(server.url)(['--api-key', 'wrong-key-value', 'ls']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('rejected the API key');
    expect(r.stderr).not.toContain('wrong-key-value');
  });

  it('keys from flags, env and the client profile all work; flags win', async () => {
    const viaEnv = await sbxAt(server.url, { SBX_API_KEY: API_KEY })(['ls', '-q']);
    expect(viaEnv.code).toBe(0);
    const home = tempDir('sbx-cli-profile-');
    mkdirSync(join(home, '.sbx'));
    writeFileSync(join(home, '.sbx', 'client.yaml'), `url: ${server.url}\napi_key: ${API_KEY}\nadmin_key: ${ADMIN_KEY}\n`);
    const viaProfile = await runSbx(['quota', 'ls', '--json'], { env: { HOME: home } });
    expect(viaProfile.code).toBe(0);
    expect(JSON.parse(viaProfile.stdout)).toEqual([]);
    const flagWins = await runSbx(['--api-key', 'nope', 'ls'], { env: { HOME: home } });
    expect(flagWins.code).toBe(1);
    writeFileSync(join(home, '.sbx', 'client.yaml'), 'url: [unclosed\n');
    const broken = await runSbx(['ls'], { env: { HOME: home } });
    expect(broken.code).toBe(3);
    expect(broken.stderr).toContain('client.yaml');
    const offline = await runSbx(['completion', 'bash'], { env: { HOME: home } });
    expect(offline.code).toBe(0);
  });

  it('admin routes name the admin key when it is missing', async () => {
    const r = await sbxAt(server.url, { SBX_API_KEY: API_KEY })(['quota', 'ls']);
    // Without an admin key the client uses /api/v1/quotas; the server decides whether that needs admin.
    if (r.code !== 0) expect(r.stderr).toMatch(/admin/i);
    const withAdmin = await sbxAt(server.url, { SBX_API_KEY: API_KEY, SBX_ADMIN_API_KEY: ADMIN_KEY })(['quota', 'summary', '--json']);
    expect(withAdmin.code).toBe(0);
    expect(JSON.parse(withAdmin.stdout).total).toBe(0);
    const wrongAdmin = await sbxAt(server.url, { SBX_API_KEY: API_KEY, SBX_ADMIN_API_KEY: 'x'.repeat(40) })(['quota', 'ls']);
    expect(wrongAdmin.code).toBe(1);
    expect(wrongAdmin.stderr).toContain('rejected the admin key');
  });
});

describe('sbx doctor', () => {
  it('passes the server checks with the right keys and prints a table with fixes', async () => {
    const home = tempDir('sbx-cli-doctor-');
    const r = await runSbx(['doctor', '--json'], {
      env: { HOME: home, SBX_URL: server.url, SBX_API_KEY: API_KEY, SBX_ADMIN_API_KEY: ADMIN_KEY, PATH: process.env.PATH },
    });
    const report = JSON.parse(r.stdout);
    const byTitle = Object.fromEntries(report.checks.map((c: { title: string }) => [c.title, c]));
    expect(byTitle['server reachable'].status).toBe('ok');
    expect(byTitle['server reachable'].detail).toContain(server.url);
    expect(byTitle['API key accepted'].status).toBe('ok');
    expect(byTitle['admin key accepted'].status).toBe('ok');
    expect(byTitle['server ready'].status).toBe('ok');
    // The test server's default provider is mock, which isolates nothing: a warning, not a failure.
    expect(byTitle['provider mock'].status).toBe('warn');
    expect(['ok', 'warn']).toContain(byTitle['local Docker engine'].status);
    expect(['ok', 'warn']).toContain(byTitle['proot and rootfs'].status);
    expect(byTitle['configuration'].status).toBe('warn');
    expect(byTitle['store path writable'].status).toBe('ok');
    for (const c of report.checks) expect(c.fix).toBeTruthy();
    expect(r.code).toBe(report.ok ? 0 : 1);
    expect(JSON.stringify(report)).not.toContain(API_KEY);
  });

  it('fails (exit 1) with a fix when the server is down or the key is wrong', async () => {
    const down = await sbxAt('http://127.0.0.1:9')(['doctor']);
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(/FAIL\s+server reachable/);
    expect(down.stdout).toContain('sbx serve');
    const badKey = await sbxAt(server.url, { SBX_API_KEY: 'bad' })(['doctor', '--json']);
    expect(badKey.code).toBe(1);
    const checks = JSON.parse(badKey.stdout).checks;
    expect(checks.find((c: { title: string }) => c.title === 'API key accepted')).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('--api-key'),
    });
  });

  it('does not blame the key for a refusal that is not about keys (rate limit)', async () => {
    const limited = await startTestServer({ rate_limit: { enabled: true, requests_per_minute: 1, burst: 1, key_by: 'ip' } });
    try {
      expect((await fetch(`${limited.url}/api/v1/sandboxes`)).status).toBe(200);
      const r = await sbxAt(limited.url)(['doctor', '--json']);
      expect(r.code).toBe(1);
      const check = JSON.parse(r.stdout).checks.find((c: { title: string }) => c.title === 'API key accepted');
      expect(check).toMatchObject({ status: 'fail', detail: expect.stringMatching(/rate limit/) });
      expect(check.fix).not.toContain('--api-key');
    } finally {
      await limited.close();
    }
  });
});

describe('sbx config lint', () => {
  it('prints findings with fixes; exit 1 on a failing finding, 3 on a broken config', async () => {
    const dir = tempDir('sbx-cli-lint-');
    writeFileSync(join(dir, 'sbx.yaml'), 'server:\n  port: 7999\n');
    const dev = await runSbx(['config', 'lint'], { cwd: dir, env: { HOME: dir } });
    expect(dev.code).toBe(0);
    expect(dev.stdout).toMatch(/WARN auth\.enabled: /);
    expect(dev.stdout).toMatch(/fix: /);
    const prod = await runSbx(['config', 'lint', '--production', '--json'], { cwd: dir, env: { HOME: dir } });
    expect(prod.code).toBe(1);
    const out = JSON.parse(prod.stdout);
    expect(out.ok).toBe(false);
    expect(out.findings.some((f: { level: string; key: string }) => f.level === 'fail' && f.key === 'auth.enabled')).toBe(true);
    writeFileSync(join(dir, 'bad.yaml'), 'server:\n  port: not-a-port\n');
    const bad = await runSbx(['config', 'lint', '--config', join(dir, 'bad.yaml')], { cwd: dir, env: { HOME: dir } });
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/^sbx: invalid configuration: .*server\.port/);
  });
});

describe('ownership through the CLI (auth.enforce_ownership)', () => {
  let owned: TestServer;
  beforeAll(async () => {
    owned = await startTestServer({ auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY, enforce_ownership: true } });
  });
  afterAll(async () => {
    await owned?.close();
  });

  it('another owner cannot see the sandbox; the admin key sees and removes it', async () => {
    const as = (env: Record<string, string>) => sbxAt(owned.url, { SBX_API_KEY: API_KEY, ...env });
    const spawned = await as({ SBX_USER_ID: 'alice' })(['spawn']);
    expect(spawned.code).toBe(0);
    const id = spawned.stdout.trim();

    const bob = as({ SBX_USER_ID: 'bob' });
    expect((await bob(['get', id])).code).toBe(4);
    expect((await bob(['ls', '-q'])).stdout).toBe('');

    const admin = as({ SBX_ADMIN_API_KEY: ADMIN_KEY });
    const got = await admin(['get', id, '--json']);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout).id).toBe(id);
    expect((await admin(['ls', '-q'])).stdout).toBe(`${id}\n`);
    const exec = await admin(['exec', id, '--', 'echo', 'as admin']);
    expect(exec.code).toBe(0);
    expect(exec.stdout).toBe('as admin\n');
    expect((await admin(['rm', id])).code).toBe(0);
    expect((await as({ SBX_USER_ID: 'alice' })(['get', id])).code).toBe(4);
  });
});
