/**
 * Secrets end to end through the real API (DESIGN.md §15, issue 34): a real control plane on a real
 * port with the docker provider, network `filtered`, `providers.docker.egress_ca_file` naming a test
 * CA and names resolved through a hosts file of this test. Secrets are made, rotated and deleted
 * with `/api/v1/secrets`; a filtered sandbox bound to one holds only its placeholder; the host's
 * curl, run in the sandbox's network namespace (nsenter) through the gateway named by the
 * sandbox's HTTPS_PROXY and trusting the CA bundle mounted in the sandbox (read out through the
 * files API), sends the placeholder to an HTTPS upstream in a network namespace of its own, which
 * echoes what it received. Needs root, docker and namespaces: SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames, filteredNetworkName } from '../../src/adapters/providers/docker/egress.js';
import { NodeCa } from '../../src/adapters/system/tls-ca.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { HostsFile, hostResolver } from '../../src/transports/egress/resolver.js';
import { call } from '../helpers/http.js';
import { sh, startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and namespaces)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxse${process.pid}`;
const VETH = `sbxse${tag}h`;
const NET = `198.19.${tag}`;
const UP = `${NET}.2`;
const ALICE = { 'x-user-id': 'alice' };

const VALUE = 'e2e-token-5f0c9a1d7b';
const ROTATED = 'e2e-rotated-83b2e4c6aa';
const OTHER_VALUE = 'e2e-other-0d44f1e9';

/** HTTPS on 443 with a certificate per SNI name (all from the test CA); it echoes the request's headers. */
const SERVER = `
const fs = require('node:fs'), https = require('node:https'), tls = require('node:tls');
const [addr, dir] = process.argv.slice(2);
const ctx = (n) => tls.createSecureContext({ key: fs.readFileSync(dir + '/' + n + '.key'), cert: fs.readFileSync(dir + '/' + n + '.crt') });
const names = { 'api.test': ctx('api.test'), 'other.test': ctx('other.test'), 'plain.test': ctx('plain.test') };
const api = names['api.test'];
https.createServer({
  key: fs.readFileSync(dir + '/api.test.key'), cert: fs.readFileSync(dir + '/api.test.crt'),
  SNICallback: (n, cb) => cb(null, names[n] || api),
}, (req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ host: req.headers.host, url: req.url, headers: req.headers }));
}).listen(443, addr, () => process.stdout.write('ready\\n'));
`;

interface Echo {
  host: string;
  url: string;
  headers: Record<string, string>;
}

describe.skipIf(SKIP !== undefined)(
  dockerTitle(`secrets end to end through the API${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`),
  () => {
    let docker: Docker;
    let srv: TestServer;
    let dir: string;
    let upstream: NetnsUpstream | undefined;
    let testCaFile = '';
    let bundleFile = '';
    let proxy = '';
    let placeholder = '';
    let id = '';
    let pid = 0;
    /** A second sandbox bound to both secrets: other.test is intercepted for it. */
    let both = { id: '', pid: 0, token: '', other: '' };
    /** Everything any upstream echoed back to a request of this test, searched for values at the end. */
    const seen: string[] = [];

    const exec = async (command: string, sandbox = id) => {
      const res = await call(srv.url, 'POST', `/api/v1/sandboxes/${sandbox}/exec`, { command, timeout: '30s' }, ALICE);
      expect(res.status, res.text).toBe(200);
      return res.body as { exit_code: number; stdout: string; stderr: string };
    };

    /** The host's curl in the sandbox's network namespace, through the sandbox's proxy: status and body. */
    async function viaGateway(
      url: string,
      auth: string,
      ca = bundleFile,
      netOf = pid,
    ): Promise<{ code: number; status: number; body: string; err: string }> {
      const r = await sh('nsenter', [
        `--net=/proc/${netOf}/ns/net`,
        'curl',
        '-sS',
        '--max-time',
        '8',
        '--proxy',
        proxy,
        '--cacert',
        ca,
        '-H',
        `Authorization: Bearer ${auth}`,
        '-w',
        '\n%{http_code}',
        url,
      ]);
      const cut = r.stdout.lastIndexOf('\n');
      const body = cut < 0 ? '' : r.stdout.slice(0, cut);
      seen.push(r.stdout, r.stderr);
      return { code: r.code, status: Number(r.stdout.slice(cut + 1)) || 0, body, err: r.stderr };
    }

    beforeAll(async () => {
      docker = await requireEngine();
      dir = tempDir('sbx-secrets-e2e-');
      const testCa = await NodeCa.open(join(dir, 'test-ca'), 'sbx e2e upstream CA');
      testCaFile = join(dir, 'test-ca', 'ca.crt');
      for (const name of ['api.test', 'other.test', 'plain.test']) {
        const leaf = await testCa.leaf({ kind: 'name', name });
        writeFileSync(join(dir, `${name}.crt`), leaf.certPem);
        writeFileSync(join(dir, `${name}.key`), leaf.keyPem);
      }
      writeFileSync(join(dir, 'server.cjs'), SERVER);
      upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [UP, dir]);
      const hosts = join(dir, 'hosts');
      writeFileSync(hosts, `${UP} api.test other.test plain.test\n`);
      srv = await startTestServer(
        {
          providers: { default: 'docker', docker: { egress_ca_file: testCaFile } },
          defaults: { image: TEST_IMAGE, memory_mb: 64 },
        },
        { egressResolve: hostResolver(new HostsFile(hosts), async () => []) },
      );
      for (const [name, value, host] of [
        ['API_TOKEN', VALUE, 'api.test'],
        ['OTHER', OTHER_VALUE, 'other.test'],
      ]) {
        const made = await call(srv.url, 'POST', '/api/v1/secrets', { name, value, hosts: [host] }, ALICE);
        expect(made.status, made.text).toBe(201);
        expect(made.text).not.toContain(value);
      }
      const spawn = async (secrets: string[]) => {
        const res = await call(
          srv.url,
          'POST',
          '/api/v1/sandboxes',
          { network: 'filtered', egress: { allow: ['api.test', 'other.test', 'plain.test'] }, secrets },
          ALICE,
        );
        expect(res.status, res.text).toBe(201);
        for (const v of [VALUE, OTHER_VALUE]) expect(res.text).not.toContain(v);
        const sid = res.body.id as string;
        return { id: sid, pid: (await docker.getContainer(`sbx-${sid}`).inspect()).State.Pid };
      };
      ({ id, pid } = await spawn(['API_TOKEN']));
      const b = await spawn(['API_TOKEN', 'OTHER']);
      both = {
        ...b,
        token: (await exec('printf %s "$API_TOKEN"', b.id)).stdout,
        other: (await exec('printf %s "$OTHER"', b.id)).stdout,
      };
      proxy = (await exec('printf %s "$HTTPS_PROXY"')).stdout;
      const bundle = await call(
        srv.url,
        'GET',
        `/api/v1/sandboxes/${id}/files?path=${encodeURIComponent('/etc/sbx/ca-bundle.crt')}`,
        undefined,
        ALICE,
      );
      expect(bundle.status, bundle.text).toBe(200);
      bundleFile = join(dir, 'bundle.crt');
      writeFileSync(bundleFile, bundle.text);
    }, 180_000);

    afterAll(async () => {
      const installation = srv?.plane.installationId;
      if (docker && installation) await removeInstallation(docker, installation);
      await srv?.close();
      if (installation) {
        const names = filteredNames({ installationId: installation });
        await docker
          .getNetwork(filteredNetworkName(installation))
          .remove()
          .catch(() => undefined);
        await removeTaggedRules(names.ruleTag).catch(() => undefined);
      }
      await upstream?.close();
    }, 60_000);

    it('the sandbox holds a placeholder, a proxy and the mounted bundle; the value is not in its environment', async () => {
      placeholder = (await exec("sh -c 'echo $API_TOKEN'")).stdout.trim();
      expect(placeholder).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
      expect(proxy).toMatch(/^http:\/\/[0-9.]+:\d+$/);
      const env = (await exec('env')).stdout;
      expect(env).toContain(`API_TOKEN=${placeholder}`);
      expect(env).toContain('SSL_CERT_FILE=/etc/sbx/ca-bundle.crt');
      expect(env).not.toContain(VALUE);
      // Only bound secrets get a variable.
      expect(env).not.toMatch(/^OTHER=/m);
      expect(env).not.toContain(OTHER_VALUE);
    });

    it('the placeholder sent to the secret’s host arrives at the upstream as the value', async () => {
      const r = await viaGateway('https://api.test/v1/call', placeholder);
      expect(r.status, r.err).toBe(200);
      const echo = JSON.parse(r.body) as Echo;
      expect(echo.host).toBe('api.test');
      expect(echo.headers.authorization).toBe(`Bearer ${VALUE}`);
    });

    it('another secret’s host, when none of the sandbox’s secrets names it, is an end-to-end tunnel: no value ever', async () => {
      // DESIGN §15: only hosts of the sandbox's own bound secrets are intercepted; other.test is not
      // (OTHER is not bound here). The sandbox's bundle does not trust the upstream: curl refuses.
      const refused = await viaGateway('https://other.test/', placeholder);
      expect(refused.code).toBe(60);
      expect(refused.err).toMatch(/certificate/i);
      // Trusting the upstream's CA: the placeholder arrives as it was sent.
      const r = await viaGateway('https://other.test/', placeholder, testCaFile);
      expect(r.status, r.err).toBe(200);
      expect((JSON.parse(r.body) as Echo).headers.authorization).toBe(`Bearer ${placeholder}`);
    });

    it('in a sandbox bound to both: API_TOKEN’s placeholder sent to other.test is refused 403 secret_not_allowed', async () => {
      expect(both.token).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
      expect(both.token).not.toBe(placeholder);
      const r = await viaGateway('https://other.test/', both.token, bundleFile, both.pid);
      expect(r.status, r.err).toBe(403);
      expect(r.body).toContain('secret_not_allowed');
      expect(r.body).not.toContain(VALUE);
      // OTHER's own placeholder to its host is injected, and the first sandbox's placeholder is foreign here.
      const ok = await viaGateway('https://other.test/', both.other, bundleFile, both.pid);
      expect(ok.status, ok.err).toBe(200);
      expect((JSON.parse(ok.body) as Echo).headers.authorization).toBe(`Bearer ${OTHER_VALUE}`);
      // The denial is on the sandbox's console (as network.denied is on its events), naming no value.
      const deadline = Date.now() + 5_000;
      let logs = '';
      while (!logs.includes('(secret_not_allowed)') && Date.now() < deadline) {
        logs = (await call(srv.url, 'GET', `/api/v1/sandboxes/${both.id}/logs?lines=200`, undefined, ALICE)).text;
        if (!logs.includes('(secret_not_allowed)')) await new Promise((res) => setTimeout(res, 100));
      }
      expect(logs).toContain('denied other.test:443 (secret_not_allowed)');
      expect(logs).not.toContain(VALUE);
      const foreign = await viaGateway('https://api.test/', placeholder, bundleFile, both.pid);
      expect(foreign.status, foreign.err).toBe(403);
      expect(foreign.body).not.toContain(VALUE);
    });

    it('an allowed host bound to no secret is a plain tunnel: the placeholder goes unchanged, the upstream’s own certificate', async () => {
      const r = await viaGateway('https://plain.test/', placeholder, testCaFile);
      expect(r.status, r.err).toBe(200);
      expect((JSON.parse(r.body) as Echo).headers.authorization).toBe(`Bearer ${placeholder}`);
    });

    it('a new value (PUT) is carried by the next requests; the answer and GET show a new fingerprint, never the value', async () => {
      const before = await call(srv.url, 'GET', '/api/v1/secrets/API_TOKEN', undefined, ALICE);
      expect(before.status).toBe(200);
      const put = await call(srv.url, 'PUT', '/api/v1/secrets/API_TOKEN', { value: ROTATED }, ALICE);
      expect(put.status, put.text).toBe(200);
      expect(put.text).not.toContain(ROTATED);
      expect(put.body.fingerprint).not.toBe(before.body.fingerprint);
      // The gateway's view is cached at most 1 s (DESIGN §15): bounded polling, 5 s.
      const deadline = Date.now() + 5_000;
      let auth = '';
      while (Date.now() < deadline) {
        const r = await viaGateway('https://api.test/rotated', placeholder);
        expect(r.status, r.err).toBe(200);
        auth = (JSON.parse(r.body) as Echo).headers.authorization ?? '';
        if (auth !== `Bearer ${VALUE}`) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      expect(auth).toBe(`Bearer ${ROTATED}`);
      const got = await call(srv.url, 'GET', '/api/v1/secrets/API_TOKEN', undefined, ALICE);
      expect(got.body.fingerprint).toBe(put.body.fingerprint);
      for (const v of [VALUE, ROTATED]) expect(got.text).not.toContain(v);
    }, 30_000);

    it('no value in any API answer, in docker inspect, nor in the sandbox’s console', async () => {
      const answers = [
        await call(srv.url, 'GET', '/api/v1/secrets', undefined, ALICE),
        await call(srv.url, 'GET', '/api/v1/secrets/OTHER', undefined, ALICE),
        await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, ALICE),
        await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, ALICE),
        await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs`, undefined, ALICE),
      ];
      for (const a of answers) {
        expect(a.status, a.text).toBe(200);
        for (const v of [VALUE, ROTATED, OTHER_VALUE]) expect(a.text).not.toContain(v);
      }
      // The injections are counted, with no name label; the metrics hold no value either.
      const metrics = (await call(srv.url, 'GET', '/api/v1/metrics/prometheus')).text;
      expect(Number(/^sbx_egress_secret_injections_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(3);
      for (const v of [VALUE, ROTATED, OTHER_VALUE]) expect(metrics).not.toContain(v);
      const inspect = JSON.stringify(await docker.getContainer(`sbx-${id}`).inspect());
      for (const v of [VALUE, ROTATED, OTHER_VALUE]) expect(inspect).not.toContain(v);
    });

    it('after DELETE, api.test is no longer intercepted: the next requests carry no value', async () => {
      const del = await call(srv.url, 'DELETE', '/api/v1/secrets/API_TOKEN', undefined, ALICE);
      expect(del.status, del.text).toBe(200);
      expect((await call(srv.url, 'GET', '/api/v1/secrets/API_TOKEN', undefined, ALICE)).status).toBe(404);
      // Within the gateway's 1 s cache the value may still be injected: bounded polling, 5 s.
      const deadline = Date.now() + 5_000;
      let r = await viaGateway('https://api.test/deleted', placeholder);
      while (r.status === 200 && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 200));
        r = await viaGateway('https://api.test/deleted', placeholder);
      }
      // The tunnel is end to end now: the node CA's leaf is gone, the sandbox's bundle does not trust the upstream.
      expect(r.code).toBe(60);
      expect(r.err).toMatch(/certificate/i);
      const plain = await viaGateway('https://api.test/deleted', placeholder, testCaFile);
      expect(plain.status, plain.err).toBe(200);
      expect((JSON.parse(plain.body) as Echo).headers.authorization).toBe(`Bearer ${placeholder}`);
      // The sandbox bound to both still has OTHER injected; its API_TOKEN placeholder is no longer bound.
      const other = await viaGateway('https://other.test/', both.other, bundleFile, both.pid);
      expect((JSON.parse(other.body) as Echo).headers.authorization).toBe(`Bearer ${OTHER_VALUE}`);
      const stale = await viaGateway('https://other.test/', both.token, bundleFile, both.pid);
      expect(stale.status, stale.err).toBe(403);
      // Since the deletion, no answer of any upstream held the old or the rotated value.
      for (const v of [VALUE, ROTATED]) expect([r, plain, other, stale].map((x) => x.body).join('\n')).not.toContain(v);
    }, 30_000);
  },
);
