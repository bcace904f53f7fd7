/**
 * `sbx doctor` on the setup questions of a first run: isolation of the default provider, which
 * Docker endpoint and why, the default image (and the pull hint of `sbx spawn`), auth off.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, SOCKET, TEST_IMAGE } from '../docker/engine.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runSbx } from './run-sbx.js';

type CheckRow = { title: string; status: string; detail: string; fix: string };

/** One regular expression from parts written one after another (each part's source as written). */
const joined = (...parts: RegExp[]) => new RegExp(parts.map((p) => p.source).join(''));

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sbx-doctor-setup-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function doctor(url: string, env: Record<string, string> = {}, args: string[] = []) {
  const home = tempDir();
  const r = await runSbx(['doctor', '--json', ...args], { cwd: home, env: { HOME: home, SBX_URL: url, PATH: process.env.PATH, ...env } });
  const report = JSON.parse(r.stdout) as { ok: boolean; checks: CheckRow[] };
  const by = Object.fromEntries(report.checks.map((c) => [c.title, c])) as Record<string, CheckRow>;
  return { r, report, by, home };
}

describe('sbx doctor: isolation, Docker endpoint, auth', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('warns that the default provider mock isolates nothing', async () => {
    const { by } = await doctor(server.url);
    expect(by['provider mock']).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/^healthy, but the default provider isolates nothing: commands run directly on the host/),
    });
    expect(by['provider mock']!.fix).toContain('providers.default: docker');
  });

  it('says which Docker endpoint it uses and why', async () => {
    const missing = await doctor(server.url, { DOCKER_HOST: 'unix:///nonexistent/sbx-doctor.sock' });
    expect(missing.by['local Docker engine']).toMatchObject({
      status: 'warn',
      detail: 'unix:///nonexistent/sbx-doctor.sock (DOCKER_HOST): ENOENT',
    });
    // No engine: the image check says it cannot tell.
    expect(missing.by['default image']).toMatchObject({ status: 'skip', detail: 'no Docker engine answers' });
    expect(missing.by['docker runtime']).toMatchObject({ status: 'skip', detail: 'no Docker engine answers' });
    const badScheme = await doctor(server.url, { DOCKER_HOST: 'ftp://x' });
    expect(badScheme.by['local Docker engine']!.status).toBe('warn');
    expect(badScheme.by['local Docker engine']!.detail).toMatch(/^no usable endpoint: .*ftp/);
    // providers.docker.socket_path wins over DOCKER_HOST, and the detail names it.
    const dir = tempDir();
    writeFileSync(join(dir, 'sbx.yaml'), 'providers:\n  docker:\n    socket_path: /nonexistent/configured.sock\n');
    const configured = await doctor(server.url, { DOCKER_HOST: 'unix:///nonexistent/env.sock' }, ['--config', join(dir, 'sbx.yaml')]);
    expect(configured.by['local Docker engine']!.detail).toBe('unix:///nonexistent/configured.sock (providers.docker.socket_path): ENOENT');
  });

  it("says whether the configured key has the shape E2B's SDKs send, never the key", async () => {
    const off = await doctor(server.url);
    expect(off.by['E2B API']).toMatchObject({ status: 'ok', detail: expect.stringContaining('auth is off') });
    const dir = tempDir();
    const plain = 'plain-key-not-e2b-0123456789';
    writeFileSync(join(dir, 'plain.yaml'), `auth:\n  enabled: true\n  api_key: ${plain}\n`);
    const wrong = await doctor(server.url, {}, ['--config', join(dir, 'plain.yaml')]);
    expect(wrong.by['E2B API']).toMatchObject({ status: 'warn', detail: expect.stringContaining('not shaped e2b_<hex>') });
    expect(wrong.r.stdout).not.toContain(plain);
    const shaped = 'e2b_0123456789abcdef0123456789abcdef01234567';
    writeFileSync(join(dir, 'e2b.yaml'), `auth:\n  enabled: true\n  api_key: ${shaped}\n`);
    const right = await doctor(server.url, {}, ['--config', join(dir, 'e2b.yaml')]);
    expect(right.by['E2B API']).toMatchObject({ status: 'ok', detail: expect.stringContaining('has the e2b_<hex> shape') });
    expect(right.r.stdout).not.toContain(shaped);
    writeFileSync(join(dir, 'none.yaml'), 'server:\n  e2b: false\n');
    expect((await doctor(server.url, {}, ['--config', join(dir, 'none.yaml')])).by['E2B API']!.status).toBe('skip');
  });

  it('explains in one line what is served while auth is off', async () => {
    const { by } = await doctor(server.url);
    expect(by['auth']).toMatchObject({
      status: 'warn',
      detail: 'off: the API is open to whoever reaches the port (browser origins and Host names limited)',
    });
    expect(by['auth']!.fix).toMatch(
      joined(
        /^dev-box guard on: browser origins limited to localhost, .*; /,
        /Host limited to IP addresses, localhost, .*; /,
        /for anything beyond a dev box set auth\.enabled: true/,
      ),
    );
    expect(by['auth']!.fix).not.toContain('\n');
    const dir = tempDir();
    writeFileSync(join(dir, 'sbx.yaml'), `auth:\n  enabled: true\n  api_key: ${'k'.repeat(40)}\n`);
    const on = await doctor(server.url, {}, ['--config', join(dir, 'sbx.yaml')]);
    expect(on.by['auth']).toMatchObject({ status: 'ok', detail: 'on: requests need an API key' });
    expect(JSON.stringify(on.report)).not.toContain('k'.repeat(40));
  });

  it('the human report prints the rows and the fixes', async () => {
    const home = tempDir();
    const r = await runSbx(['doctor'], {
      cwd: home,
      env: { HOME: home, SBX_URL: server.url, PATH: process.env.PATH, DOCKER_HOST: 'unix:///nonexistent/h.sock' },
    });
    expect(r.stdout).toMatch(/warn\s+provider mock\s+healthy, but the default provider isolates nothing/);
    expect(r.stdout).toMatch(/warn\s+local Docker engine\s+unix:\/\/\/nonexistent\/h\.sock \(DOCKER_HOST\): ENOENT/);
    expect(r.stdout).toMatch(/warn\s+auth\s+off: the API is open to whoever reaches the port/);
    expect(r.stdout).toMatch(
      joined(
        /\n! auth: dev-box guard on: browser origins limited to localhost, [^\n]+; /,
        /Host limited to [^\n]+; /,
        /for anything beyond a dev box set auth\.enabled: true[^\n]*\n/,
      ),
    );
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx doctor and spawn: the default image'), () => {
  let server: TestServer;
  const UNPULLABLE = 'sbx-test/never-pullable:nope';
  beforeAll(async () => {
    await requireEngine();
    server = await startTestServer({
      providers: { default: 'docker', docker: { socket_path: SOCKET } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it(
    'doctor: a present default image is ok; a missing one is "pull not verified" with local images (the ' + "server's own when it answers)",
    async () => {
      const dir = tempDir();
      writeFileSync(
        join(dir, 'present.yaml'),
        `providers:\n  default: docker\n  docker:\n    socket_path: ${SOCKET}\ndefaults:\n  image: ${TEST_IMAGE}\n`,
      );
      writeFileSync(
        join(dir, 'missing.yaml'),
        `providers:\n  default: docker\n  docker:\n    socket_path: ${SOCKET}\ndefaults:\n  image: ${UNPULLABLE}\n`,
      );
      const present = await doctor(server.url, {}, ['--config', join(dir, 'present.yaml')]);
      expect(present.by['local Docker engine']).toMatchObject({
        status: 'ok',
        detail: `unix://${SOCKET} (providers.docker.socket_path) answers OK`,
      });
      // A server that answers names its own default image (issue 31 item 6): the local config's is not checked.
      expect(present.by['server default image']).toMatchObject({ status: 'ok', detail: `${TEST_IMAGE} is present on the server's engine` });
      expect(present.by['default image']).toBeUndefined();
      expect((await doctor(server.url, {}, ['--config', join(dir, 'missing.yaml')])).by['default image']).toBeUndefined();
      // Without a server, the local config's image is checked on the local engine.
      const alone = await doctor('http://127.0.0.1:1', {}, ['--config', join(dir, 'present.yaml')]);
      expect(alone.by['default image']).toMatchObject({ status: 'ok', detail: `${TEST_IMAGE} is present` });
      const missing = await doctor('http://127.0.0.1:1', {}, ['--config', join(dir, 'missing.yaml')]);
      const row = missing.by['default image']!;
      expect(row.status).toBe('warn');
      expect(row.detail).toMatch(new RegExp(`^${UNPULLABLE} is not present: pull not verified .*; images the engine has: \\S+`));
      expect(row.fix).toMatch(/--image NAME or set defaults\.image to a local image \(e\.g\. \S+\)/);
    },
  );

  it("doctor: the docker runtime row names the engine's runtimes and fails on one it lacks", async () => {
    const dir = tempDir();
    const conf = (runtime: string) =>
      `providers:\n  default: docker\n  docker:\n    socket_path: ${SOCKET}\n    runtime: ${runtime}\ndefaults:\n  image: ${TEST_IMAGE}\n`;
    writeFileSync(join(dir, 'runc.yaml'), conf('runc'));
    writeFileSync(join(dir, 'nope.yaml'), conf('sbx-no-such-runtime'));
    const runc = await doctor(server.url, {}, ['--config', join(dir, 'runc.yaml')]);
    expect(runc.by['docker runtime']).toMatchObject({ status: 'ok', detail: expect.stringMatching(/^runc; registered: (\S+, )*runc/) });
    const nope = await doctor(server.url, {}, ['--config', join(dir, 'nope.yaml')]);
    expect(nope.by['docker runtime']).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(
        /^providers\.docker\.runtime is sbx-no-such-runtime, which the engine does not have \(registered: .*runc/,
      ),
    });
    expect(nope.by['docker runtime']!.fix).toMatch(/apt-get install runsc/);
    if (process.env.SBX_TEST_RUNSC === '1') {
      writeFileSync(join(dir, 'runsc.yaml'), conf('runsc'));
      expect((await doctor(server.url, {}, ['--config', join(dir, 'runsc.yaml')])).by['docker runtime']).toMatchObject({
        status: 'ok',
        detail: expect.stringMatching(/^runsc \(gVisor\); registered: /),
      });
    }
  });

  it('spawn of an image that cannot be pulled names --image, defaults.image and sbx doctor; the API body lists no images', async () => {
    const r = await runSbx(['spawn', '--image', UNPULLABLE], { env: { SBX_URL: server.url } });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      new RegExp(
        `^sbx: image ${UNPULLABLE} could not be pulled: .*; spawn with --image NAME .* or set defaults\\.image ` +
          `in the server config; \`sbx doctor\` lists the images the engine has\\n$`,
      ),
    );
    // From a template the fix is the template's image.
    expect((await runSbx(['templates', 'create', 'unpullable', '--image', UNPULLABLE], { env: { SBX_URL: server.url } })).code).toBe(0);
    for (const argv of [
      ['spawn', '--template', 'unpullable'],
      ['templates', 'spawn', 'unpullable'],
    ]) {
      const t = await runSbx(argv, { env: { SBX_URL: server.url } });
      expect(t.code).toBe(1);
      expect(t.stderr).toMatch(
        joined(
          /could not be pulled: .*; /,
          /edit the template's image to one the engine has \(sbx templates update unpullable --image NAME\); /,
          /`sbx doctor` lists the images the engine has\n$/,
        ),
      );
    }
    const res = await fetch(`${server.url}/api/v1/sandboxes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ image: UNPULLABLE }),
    });
    const body = (await res.json()) as { code: string; message: string };
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(body.message).toContain('could not be pulled');
    expect(body.message).not.toContain(TEST_IMAGE);
    expect(body.message).not.toContain('doctor');
  });
});
