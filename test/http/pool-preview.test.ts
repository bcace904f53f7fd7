/**
 * Issue 30 item 3, mock/proot half (DESIGN.md §8): pool tenants share their runtime's network, so
 * a port is the runtime's. A tenant's preview is served only when what listens on the port belongs
 * to a process of that tenant's own PID namespace; another tenant's listener answers 502 as if
 * nothing listened — with `server.preview_auth` and each tenant's own valid token.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { freePort, hostRequest, type Reply } from '../helpers/preview.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const DOMAIN = 'pool-preview.test';
const prootOn = process.env.SBX_TEST_PROOT === '1';
const as = (user: string) => ({ 'x-user-id': user });

function suite(name: string, providers: () => Record<string, unknown>): void {
  describe(`pool previews on ${name}`, () => {
    let dir: string;
    let srv: TestServer;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `sbx-pool-preview-${name}-`));
      srv = await startTestServer({
        pool: { enabled: true, max_vms: 1, max_users_per_vm: 2 },
        server: { preview_domain: DOMAIN, preview_auth: true },
        providers: providers(),
      });
    }, 60_000);
    afterAll(async () => {
      await srv?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** Starts busybox httpd in the background in the tenant's workspace on 127.0.0.1:port. */
    async function serve(id: string, user: string, port: number, page: string): Promise<void> {
      expect(
        (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/www/index.html', content: page }, as(user))).status,
      ).toBe(200);
      const started = await call(
        srv.url,
        'POST',
        `/api/v1/sandboxes/${id}/exec`,
        { command: `busybox httpd -f -p 127.0.0.1:${port} -h www & echo up`, timeout: '30s' },
        as(user),
      );
      expect(started.body).toMatchObject({ exit_code: 0, stdout: 'up\n' });
    }

    const preview = (id: string, port: number, token: string): Promise<Reply> =>
      hostRequest(srv.url, `${port}-${id}.${DOMAIN}`, '/index.html', { headers: { 'x-sbx-preview-token': token } });

    async function until200(id: string, port: number, token: string): Promise<Reply> {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await preview(id, port, token);
        if (r.status === 200 || Date.now() > deadline) return r;
        await new Promise((res) => setTimeout(res, 100));
      }
    }

    it("a tenant's preview reaches only its own listeners: the neighbour's port answers 502 as if nothing listened", async () => {
      const a = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'))).body;
      const b = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('bob'))).body;
      expect(a.preview_token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(b.preview_token).toMatch(/^[A-Za-z0-9_-]{32}$/);
      // One shared runtime: the two tenants share its network (and so its ports).
      expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toMatchObject({ vms: 1, total_users: 2 });
      try {
        const bobPort = await freePort();
        await serve(b.id, 'bob', bobPort, "bob's page\n");
        const own = await until200(b.id, bobPort, b.preview_token);
        expect(own.status).toBe(200);
        expect(own.body.toString()).toBe("bob's page\n");

        // Alice asks for the same port of her own sandbox, with her own valid token.
        const foreign = await preview(a.id, bobPort, a.preview_token);
        expect(foreign.status).toBe(502);
        expect(JSON.parse(foreign.body.toString())).toMatchObject({ code: 'bad_gateway' });
        expect(foreign.body.toString()).not.toContain("bob's page");

        // Her own server on a port of hers is hers to preview; Bob cannot reach it through his sandbox.
        const alicePort = await freePort();
        await serve(a.id, 'alice', alicePort, "alice's page\n");
        const mine = await until200(a.id, alicePort, a.preview_token);
        expect(mine.body.toString()).toBe("alice's page\n");
        expect((await preview(b.id, alicePort, b.preview_token)).status).toBe(502);

        // Once Bob is gone, his server is gone with his namespace: nothing listens on his port.
        expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${b.id}`, undefined, as('bob'))).status).toBe(200);
        const deadline = Date.now() + 5_000;
        let refused = false;
        while (!refused && Date.now() < deadline) {
          refused = await new Promise<boolean>((resolve) => {
            const s = connect(bobPort, '127.0.0.1');
            s.once('connect', () => {
              s.destroy();
              resolve(false);
            });
            s.once('error', () => resolve(true));
          });
          if (!refused) await new Promise((res) => setTimeout(res, 100));
        }
        expect(refused, "bob's server ends with his workspace").toBe(true);
        expect((await preview(a.id, alicePort, a.preview_token)).status).toBe(200);
      } finally {
        await call(srv.url, 'DELETE', `/api/v1/sandboxes/${a.id}`, undefined, as('alice'));
        await call(srv.url, 'DELETE', `/api/v1/sandboxes/${b.id}`, undefined, as('bob'));
      }
    });
  });
}

suite('mock', () => ({}));

describe.skipIf(!prootOn)(`proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let rootfsDir: string;
  beforeAll(() => {
    rootfsDir = mkdtempSync(join(tmpdir(), 'sbx-pool-preview-rootfs-'));
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), join(rootfsDir, 'rootfs')], { stdio: 'pipe' });
  });
  afterAll(() => {
    if (rootfsDir) rmSync(rootfsDir, { recursive: true, force: true });
  });
  suite('proot', () => ({ default: 'proot', proot: { rootfs: join(rootfsDir, 'rootfs') } }));
});
