/**
 * Pool tenants stay apart on docker (DESIGN.md §8), against the real engine and a real control
 * plane: a uid is never given to a second tenant (a background loop a tenant leaves dies with its
 * workspace, and the next tenant gets a new uid), and a tenant's preview reaches only its own
 * listener (another tenant's server on the same port of the shared runtime is a 502).
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { hostRequest } from '../helpers/preview.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const ADMIN = 'pool-tenants-admin-key-0123456789';
const DOMAIN = 'preview.test';
const as = (user: string) => ({ 'x-user-id': user });

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('pool tenants on docker: uids never reused, previews only to their own'), () => {
  let docker: Docker;
  let srv: TestServer;

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({
      pool: { enabled: true, max_vms: 1, max_users_per_vm: 3, image: TEST_IMAGE, memory_mb: 64 },
      providers: { default: 'docker' },
      server: { preview_domain: DOMAIN, preview_auth: true },
      auth: { admin_api_key: ADMIN },
    });
  }, 60_000);

  afterAll(async () => {
    const admin = { 'x-admin-api-key': ADMIN };
    for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, admin).catch(() => ({ body: [] }))).body ?? [])
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`, undefined, admin).catch(() => undefined);
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (docker && installation) await removeInstallation(docker, installation);
  });

  const spawn = async (user: string) => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as(user));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { id: string; preview_token: string };
  };
  const exec = async (user: string, id: string, command: string) =>
    (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '20s' }, as(user))).body as {
      exit_code: number;
      stdout: string;
    };
  /** A command as root in the one shared runtime, straight through the engine (not through sbx). */
  const asRoot = async (cmd: string) => {
    const [c] = await docker.listContainers({ filters: { label: [`sbx.installation_id=${srv.plane.installationId}`] } });
    const e = await docker.getContainer(c!.Id).exec({ Cmd: ['sh', '-c', cmd], User: '0', AttachStdout: true, AttachStderr: true });
    const stream = await e.start({ hijack: true, stdin: false });
    const chunks: Buffer[] = [];
    stream.on('data', (b: Buffer) => chunks.push(b));
    await new Promise((r) => stream.on('end', r));
    // Multiplexed frames: 8-byte headers, then the payload.
    const raw = Buffer.concat(chunks);
    let out = '';
    for (let i = 0; i + 8 <= raw.length; i += 8 + raw.readUInt32BE(i + 4))
      out += raw.subarray(i + 8, i + 8 + raw.readUInt32BE(i + 4)).toString();
    return out;
  };
  /** Uids of the runtime's live processes (ps as root). */
  const uidsRunning = async () =>
    (await asRoot('ps -o user,stat,args'))
      .split('\n')
      .slice(1)
      .filter((l) => l.trim() && !/^\S+\s+Z/.test(l))
      .map((l) => l.trim().split(/\s+/)[0]);

  it('a loop a tenant leaves dies with its workspace; the next tenant gets a new uid and its secret stays unread', async () => {
    const carol = await spawn('carol'); // keeps the runtime alive while tenants come and go
    const alice = await spawn('alice');
    expect((await exec('carol', carol.id, 'id -u')).stdout).toBe('10000\n');
    expect((await exec('alice', alice.id, 'id -u')).stdout).toBe('10001\n');
    const loop =
      `setsid sh -c 'while :; do cat /workspace/*/s* >> /tmp/loot 2>/dev/null; cat /workspace/*/s* ` +
      `>> /dev/shm/loot 2>/dev/null; sleep 0.2; done' </dev/null >/dev/null 2>&1 &`;
    expect((await exec('alice', alice.id, loop)).exit_code).toBe(0);
    expect(await uidsRunning()).toContain('10001');

    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${alice.id}`, undefined, as('alice'))).status).toBe(200);
    expect(await uidsRunning()).not.toContain('10001');
    // Its files in the shared temporary directories went with it.
    expect(await asRoot('ls -a /tmp /dev/shm')).not.toContain('loot');

    const bob = await spawn('bob');
    expect((await exec('bob', bob.id, 'id -u')).stdout).toBe('10002\n');
    const wrote = await call(srv.url, 'POST', `/api/v1/sandboxes/${bob.id}/files`, { path: '/s.txt', content: 'bob secret' }, as('bob'));
    expect(wrote.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000)); // a few rounds of the loop, had it survived
    expect(await asRoot('grep -rl "bob secret" /tmp /dev/shm; echo done')).toBe('done\n');
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 1, total_users: 2 });
    for (const [u, s] of [
      ['carol', carol],
      ['bob', bob],
    ] as const)
      expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`, undefined, as(u))).status).toBe(200);
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 0, total_users: 0 });
  }, 90_000);

  it("a tenant's preview reaches only its own listener: another tenant's port is a 502, its own a 200", async () => {
    const bob = await spawn('bob');
    const carol = await spawn('carol');
    const serve = async (user: string, id: string, port: number, page: string) => {
      // Retried while the port is still being let go of by a server just killed.
      const r = await exec(
        user,
        id,
        `mkdir -p www && echo '${page}' > www/index.html && for i in $(seq 50); do busybox httpd -p ${port} -h ` +
          `"$PWD/www" && exit 0; sleep 0.1; done; exit 1`,
      );
      expect(r.exit_code).toBe(0);
    };
    const preview = (box: { id: string; preview_token: string }, port: number) =>
      hostRequest(srv.url, `${port}-${box.id}.${DOMAIN}`, '/index.html', { headers: { 'x-sbx-preview-token': box.preview_token } });
    await serve('bob', bob.id, 8080, 'bob page');
    await serve('carol', carol.id, 8081, 'carol page');

    const own = await preview(bob, 8080);
    expect(own.status).toBe(200);
    expect(own.body.toString()).toBe('bob page\n');
    // Carol asks for port 8080 of her own sandbox, with her own valid token: Bob's server is not hers.
    const foreign = await preview(carol, 8080);
    expect(foreign.status).toBe(502);
    expect(JSON.parse(foreign.body.toString())).toEqual({
      code: 'bad_gateway',
      message: `nothing is listening on port 8080 of sandbox ${carol.id}`,
    });
    expect((await preview(carol, 8081)).body.toString()).toBe('carol page\n');
    expect((await preview(bob, 8081)).status).toBe(502);
    // Nothing listens at all: the same answer.
    expect((await preview(bob, 8099)).status).toBe(502);
    // Bob's server goes and Carol's takes the port: from then on it is hers, never Bob's (checked per request).
    await exec('bob', bob.id, 'kill -9 -1; true'); // every process of Bob's uid but this one
    await serve('carol', carol.id, 8080, 'carol on 8080');
    expect((await preview(bob, 8080)).status).toBe(502);
    expect((await preview(carol, 8080)).body.toString()).toBe('carol on 8080\n');
  }, 90_000);
});
