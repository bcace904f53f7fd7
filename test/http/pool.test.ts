/**
 * Pool mode (DESIGN.md §8) end to end: logical sandboxes as workspaces of shared runtimes on a
 * real control plane — mock always; docker (own uid per tenant, mode 0700) when SBX_TEST_DOCKER=1.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poolCommand } from '../../src/transports/cli/commands/pool.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, requireEngine, TEST_IMAGE } from '../docker/engine.js';

const as = (user: string) => ({ 'x-user-id': user });
const ADMIN = 'pool-admin-key-0123456789';

describe('pool mode on mock', () => {
  let dir: string;
  let srv: TestServer;
  const config = () => ({
    pool: { enabled: true, max_vms: 2, max_users_per_vm: 2 },
    auth: { admin_api_key: ADMIN },
    database: { driver: 'sqlite', path: join(dir, 'pool.db') },
    providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } },
  });
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-pool-'));
    srv = await startTestServer(config());
  });
  afterAll(async () => {
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'needs X-User-ID; two users share one runtime, each in a workspace the other cannot reach; full → 503; ' +
      'the last destroy removes the runtime; a restart keeps the slots',
    async () => {
      const none = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(none.status).toBe(400);
      expect(none.body.message).toMatch(/X-User-ID/);
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toEqual({
        enabled: true,
        vms: 0,
        max_vms: 2,
        total_users: 0,
        max_users_per_vm: 2,
      });

      const alice = (await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '10m', memory_mb: 4096 }, as('alice'))).body;
      const bob = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('bob'))).body;
      expect(alice.id).toMatch(/^sb-/);
      expect(alice.owner_id).toBe('alice');
      expect(alice.memory_mb).toBe(512); // the pool's shape, not the request's
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 1, total_users: 2 });
      expect(readdirSync(join(dir, 'mock')).filter((n) => n.startsWith('pool-'))).toHaveLength(1);

      // Files are re-rooted into the workspace and shown back re-rooted.
      expect(
        (await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/files`, { path: '/notes/a.txt', content: 'alice only' }, as('alice')))
          .status,
      ).toBe(200);
      const read = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/notes/a.txt`, undefined, as('alice'));
      expect(read.text).toBe('alice only');
      const list = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files/list?path=/notes`, undefined, as('alice'));
      expect(list.body.map((f: { path: string }) => f.path)).toEqual(['/notes/a.txt']);
      const glob = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files/glob?pattern=/**/*.txt`, undefined, as('alice'));
      expect(glob.body).toEqual(['/notes/a.txt']);
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/../x`, undefined, as('alice'))).status).toBe(400);
      // Bob's workspace is his own; Alice's sandbox does not exist for him.
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${bob.id}/files?path=/notes/a.txt`, undefined, as('bob'))).status).toBe(404);
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/notes/a.txt`, undefined, as('bob'))).status).toBe(404);
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}`, undefined, as('bob'))).status).toBe(404);
      expect((await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, as('bob'))).body.map((s: { id: string }) => s.id)).toEqual([
        bob.id,
      ]);
      // Exec starts in the workspace.
      const ls = await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/exec`, { command: 'cat notes/a.txt' }, as('alice'));
      expect(ls.body).toMatchObject({ exit_code: 0, stdout: 'alice only' });
      const admin = await call(srv.url, 'GET', '/api/v1/pool/status', undefined, { 'x-admin-api-key': ADMIN });
      expect(admin.body.runtimes).toEqual([{ runtime_id: expect.stringMatching(/^pool-/), users: 2 }]);
      const metrics = (await call(srv.url, 'GET', '/api/v1/admin/metrics/prometheus', undefined, { 'x-admin-api-key': ADMIN })).text;
      expect(metrics).toMatch(/^sbx_pool_users 2$/m);
      expect(metrics).toMatch(/^sbx_pool_vms 1$/m);
      const diag = (await call(srv.url, 'GET', '/api/v1/admin/diagnostics', undefined, { 'x-admin-api-key': ADMIN })).body;
      expect(diag.pool).toMatchObject({ enabled: true, vms: 1, max_vms: 2, total_users: 2, max_users_per_vm: 2, provider: 'mock' });
      const cli = fakeCli({ url: srv.url, adminKey: ADMIN });
      expect(await runCommand(poolCommand, cli.ctx, {})).toBe(0);
      expect(cli.stdout()).toMatch(/runtimes:\s+1 of 2/);
      expect(cli.stdout()).toMatch(/workspaces:\s+2 \(at most 2 per runtime\)/);
      await cli.close();

      // Two runtimes of two: the fifth tenant is refused.
      for (const u of ['carol', 'dave']) expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as(u))).status).toBe(201);
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 2, total_users: 4 });
      const full = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('erin'));
      expect(full.status).toBe(503);
      expect(full.body).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/pool is full/) });

      // A restart keeps every assignment: the same files, the same runtimes.
      await srv.close().catch(() => undefined);
      srv = await startTestServer(config());
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 2, total_users: 4 });
      expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/notes/a.txt`, undefined, as('alice'))).text).toBe(
        'alice only',
      );

      // Destroying a workspace frees its slot; the last one of a runtime removes the runtime.
      expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${alice.id}`, undefined, as('alice'))).status).toBe(200);
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 2, total_users: 3 });
      expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('erin'))).status).toBe(201);
      for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'x-admin-api-key': ADMIN })).body) {
        expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`, undefined, { 'x-admin-api-key': ADMIN })).status).toBe(200);
      }
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 0, total_users: 0 });
      expect(readdirSync(join(dir, 'mock')).filter((n) => n.startsWith('pool-'))).toHaveLength(0);
    },
  );
});

describe.skipIf(DOCKER_SKIP !== undefined)(`pool mode on docker${DOCKER_SKIP ? ` (skipped: ${DOCKER_SKIP})` : ''}`, () => {
  let srv: TestServer;
  beforeAll(async () => {
    await requireEngine();
    srv = await startTestServer({
      pool: { enabled: true, max_vms: 1, max_users_per_vm: 3, image: TEST_IMAGE, memory_mb: 64 },
      providers: { default: 'docker' },
      auth: { admin_api_key: ADMIN },
    });
  });
  afterAll(async () => {
    // Whatever a failed assertion left: an admin sees every tenant's sandbox, and the last destroy takes the container.
    const admin = { 'x-admin-api-key': ADMIN };
    for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, admin).catch(() => ({ body: [] }))).body ?? []) {
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`, undefined, admin).catch(() => undefined);
    }
    await srv?.close();
  });

  it('each tenant runs as its own uid in a 0700 workspace: no read or write of another tenant by exec, by API, ' +
    'or by a planted symlink', async () => {
    const alice = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'))).body;
    const bob = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('bob'))).body;
    expect(JSON.stringify(alice)).toContain(TEST_IMAGE);
    expect(
      (await call(srv.url, 'POST', `/api/v1/sandboxes/${bob.id}/files`, { path: '/secret.txt', content: 'bob secret' }, as('bob'))).status,
    ).toBe(200);

    const who = await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/exec`, { command: 'id -u; pwd; stat -c %a .' }, as('alice'));
    expect(who.body.stdout).toBe(`10000\n/workspace/${alice.id}\n700\n`);
    const bobWho = await call(srv.url, 'POST', `/api/v1/sandboxes/${bob.id}/exec`, { command: 'id -u; cat secret.txt' }, as('bob'));
    expect(bobWho.body.stdout).toBe('10001\nbob secret');

    const steal = await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${alice.id}/exec`,
      { command: `cat /workspace/${bob.id}/secret.txt` },
      as('alice'),
    );
    expect(steal.body.exit_code).not.toBe(0);
    expect(steal.body.stdout).toBe('');
    const scribble = await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${alice.id}/exec`,
      { command: `echo x > /workspace/${bob.id}/owned.txt` },
      as('alice'),
    );
    expect(scribble.body.exit_code).not.toBe(0);

    // A symlink planted in Alice's workspace does not make the API read Bob's file for her.
    await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${alice.id}/exec`,
      { command: `ln -s /workspace/${bob.id}/secret.txt link` },
      as('alice'),
    );
    const viaLink = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/link`, undefined, as('alice'));
    expect(viaLink.status).toBeGreaterThanOrEqual(400);
    expect(viaLink.text).not.toContain('bob secret');
    const writeLink = await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${alice.id}/files`,
      { path: '/link', content: 'overwritten' },
      as('alice'),
    );
    expect(writeLink.status).toBeGreaterThanOrEqual(400);
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${bob.id}/files?path=/secret.txt`, undefined, as('bob'))).text).toBe(
      'bob secret',
    );

    // Files written through the API belong to the tenant (its own exec can change them).
    await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/files`, { path: '/mine.txt', content: 'a' }, as('alice'));
    const own = await call(
      srv.url,
      'POST',
      `/api/v1/sandboxes/${alice.id}/exec`,
      { command: 'stat -c %u mine.txt && echo b >> mine.txt && cat mine.txt' },
      as('alice'),
    );
    expect(own.body.stdout).toBe('10000\nab\n');

    // The last workspace's destroy removes the shared container.
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 1, total_users: 2 });
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${alice.id}`, undefined, as('alice'));
    const gone = await call(srv.url, 'POST', `/api/v1/sandboxes/${bob.id}/exec`, { command: `ls /workspace` }, as('bob'));
    expect(gone.body.stdout).not.toContain(alice.id);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${bob.id}`, undefined, as('bob'));
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 0, total_users: 0 });
  }, 60_000);
});

const prootOn = process.env.SBX_TEST_PROOT === '1';
describe.skipIf(!prootOn)(`pool mode on proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let dir: string;
  let srv: TestServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-pool-proot-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    srv = await startTestServer({
      pool: { enabled: true, max_vms: 1, max_users_per_vm: 2 },
      providers: { default: 'proot', proot: { rootfs } },
    });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(tmpdir(), `sbx-proot-${installation}`), { recursive: true, force: true });
    rmSync(join(tmpdir(), `.sbx-proot-${installation}.sbx`), { recursive: true, force: true });
  });

  it('workspaces of one proot copy: paths re-rooted and confined, exec in /workspace/<id>, full → 503, the ' +
    'last destroy removes the copy', async () => {
    const alice = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'))).body;
    const bob = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('bob'))).body;
    expect(alice.provider).toBe('proot');
    await call(srv.url, 'POST', `/api/v1/sandboxes/${bob.id}/files`, { path: '/b.txt', content: 'bob' }, as('bob'));
    const pwd = await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/exec`, { command: 'pwd' }, as('alice'));
    expect(pwd.body.stdout).toBe(`/workspace/${alice.id}\n`);
    // Alice's API paths cannot reach Bob's workspace, not even by a symlink she plants.
    await call(srv.url, 'POST', `/api/v1/sandboxes/${alice.id}/exec`, { command: `ln -s /workspace/${bob.id}/b.txt link` }, as('alice'));
    const viaLink = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/link`, undefined, as('alice'));
    expect(viaLink.text).not.toContain('bob');
    expect(
      (await call(srv.url, 'GET', `/api/v1/sandboxes/${alice.id}/files?path=/../${bob.id}/b.txt`, undefined, as('alice'))).status,
    ).toBe(400);
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('carol'))).status).toBe(503);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${alice.id}`, undefined, as('alice'));
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${bob.id}`, undefined, as('bob'));
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 0, total_users: 0 });
  }, 60_000);
});
