/**
 * The filtered network's lifecycle and previews (DESIGN.md §9, §10), against the real engine and
 * the real host firewall: a filtered sandbox's httpd answers its preview (replies to connections
 * the host opened pass the host INPUT rules) while the sandbox still cannot open a connection to
 * the host; a `sbx serve` start with no filtered spawn makes no network and no rules; after a
 * `kill -9`, the next start of the same installation re-uses the network and its rules (no
 * duplicates) while a filtered sandbox lives, and removes both when none is left. Needs root,
 * docker and a built dist/: SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames } from '../../src/adapters/providers/docker/egress.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { call } from '../helpers/http.js';
import { sh } from '../helpers/netns-upstream.js';
import { hostRequest } from '../helpers/preview.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { api, ensureBuilt, installationOf, serve, until, type Served } from '../reliability/harness.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and the host firewall)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const DOMAIN = 'preview.test';
/** Host INPUT rules per filtered network: established replies, related ICMP, gateway, DNS udp and tcp, the reject. */
const RULES = 6;

/** INPUT rules carrying the tag (or its install guard's), as `iptables -S` prints them. */
async function taggedLines(tag: string): Promise<string[]> {
  return (await sh('iptables', ['-S', 'INPUT'])).stdout.split('\n').filter((l) => l.includes(tag));
}

async function networkId(docker: Docker, name: string): Promise<string | null> {
  return docker
    .getNetwork(name)
    .inspect()
    .then(
      (n: { Id: string }) => n.Id,
      () => null,
    );
}

/** A container's PID and its gateway on the network it joined. */
async function where(docker: Docker, sandboxId: string): Promise<{ pid: number; gw: string }> {
  const info = await docker.getContainer(`sbx-${sandboxId}`).inspect();
  return { pid: info.State.Pid, gw: Object.values(info.NetworkSettings.Networks)[0]?.Gateway ?? '' };
}

/** curl from inside a sandbox's network namespace, ignoring its proxy variables. */
const curlFrom = (pid: number, url: string) =>
  sh('nsenter', [`--net=/proc/${pid}/ns/net`, 'curl', '-sS', '--noproxy', '*', '--max-time', '3', url], 15_000);

describe.skipIf(SKIP !== undefined)(dockerTitle(`previews of filtered sandboxes${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`), () => {
  let docker: Docker;
  let srv: TestServer;
  let hostWeb: Server;
  let hostPort: number;

  beforeAll(async () => {
    docker = await requireEngine();
    // A host service on all addresses: a filtered sandbox must not reach it.
    hostWeb = createServer((_req, res) => res.end('host service'));
    await new Promise<void>((r) => hostWeb.listen(0, '0.0.0.0', r));
    hostPort = (hostWeb.address() as AddressInfo).port;
    srv = await startTestServer({
      server: { host: '0.0.0.0', preview_domain: DOMAIN },
      providers: { default: 'docker' },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
  }, 60_000);

  afterAll(async () => {
    hostWeb?.close();
    const installation = srv?.plane.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await srv?.close();
    if (installation) {
      const tag = filteredNames({ installationId: installation }).ruleTag;
      const left = await taggedLines(tag);
      await removeTaggedRules(tag);
      expect(left).toEqual([]);
    }
  }, 60_000);

  it("a filtered sandbox's httpd answers its preview with 200; the sandbox still cannot open a connection to the host", async () => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' });
    expect(res.status, res.text).toBe(201);
    const id = res.body.id as string;
    const started = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: 'mkdir -p /tmp/www && echo hello from a filtered sandbox > /tmp/www/index.html && busybox httpd -p 8080 -h /tmp/www',
      timeout: '30s',
    });
    expect(started.body.exit_code, JSON.stringify(started.body)).toBe(0);
    const host = `8080-${id}.${DOMAIN}`;
    const page = await until(async () => {
      const r = await hostRequest(srv.url, host, '/index.html').catch(() => null);
      return r?.status === 200 ? r : null;
    }, 20_000);
    expect(page?.status).toBe(200);
    expect(page?.body.toString()).toBe('hello from a filtered sandbox\n');
    // Again, with a body of some size (replies keep flowing).
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'head -c 3000000 /dev/zero > /tmp/www/big', timeout: '30s' });
    const big = await hostRequest(srv.url, host, '/big');
    expect(big.status).toBe(200);
    expect(big.body.length).toBe(3_000_000);

    const { pid, gw } = await where(docker, id);
    const apiPort = new URL(srv.url).port;
    for (const port of [hostPort, Number(apiPort), 22])
      expect((await curlFrom(pid, `http://${gw}:${port}/`)).code, `port ${port}`).not.toBe(0);
    // The gateway answers (control), and the host service is there from the host (control).
    expect((await curlFrom(pid, `http://${gw}:3128/`)).stdout).toContain('absolute-form');
    expect((await sh('curl', ['-sS', '--max-time', '3', `http://127.0.0.1:${hostPort}/`])).stdout).toBe('host service');
  }, 90_000);
});

describe.skipIf(SKIP !== undefined)(
  dockerTitle(`the filtered network across serve processes${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`),
  () => {
    let docker: Docker;
    let home: string;
    let installation = '';
    let names: ReturnType<typeof filteredNames>;
    let sandbox = '';
    let firstNetwork: string | null = null;
    const served: Served[] = [];
    const config = { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } };
    const start = async () => {
      const s = await serve(home, { config });
      served.push(s);
      return s;
    };

    beforeAll(async () => {
      docker = await requireEngine();
      ensureBuilt();
      home = tempDir('sbx-egress-life-');
    }, 180_000);

    afterAll(async () => {
      for (const s of served) await s.kill9();
      if (installation) {
        await removeInstallation(docker, installation);
        await docker
          .getNetwork(names.network)
          .remove()
          .catch(() => undefined);
        await removeTaggedRules(names.ruleTag);
      }
    }, 60_000);

    it('a start with no filtered spawn makes no network and no rules; the first filtered spawn makes both', async () => {
      const s = await start();
      installation = await installationOf(home);
      expect(installation).not.toBe('');
      names = filteredNames({ installationId: installation });
      expect(await networkId(docker, names.network)).toBeNull();
      expect(await taggedLines(names.ruleTag)).toEqual([]);
      const res = await api(s.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' });
      expect(res.status, res.text).toBe(201);
      sandbox = res.json.id;
      firstNetwork = await networkId(docker, names.network);
      expect(firstNetwork).not.toBeNull();
      const lines = await taggedLines(names.ruleTag);
      expect(lines).toHaveLength(RULES);
      expect(lines[0]).toContain('ESTABLISHED');
      expect(lines[RULES - 1]).toContain('REJECT');
      await s.kill9();
      expect(await taggedLines(names.ruleTag)).toHaveLength(RULES);
    }, 120_000);

    it('after kill -9 with the filtered sandbox alive, the next start re-uses network and rules: no ' +
      'duplicates, the gateway answers', async () => {
      expect(sandbox).not.toBe('');
      // A stray copy, as a run killed in the middle of an install would leave.
      const reject = (await taggedLines(names.ruleTag)).find((l) => l.includes('REJECT'))!;
      const words = reject
        .replace(/^-A INPUT /, '')
        .replace(/"/g, '')
        .split(/\s+/);
      expect((await sh('iptables', ['-w', '5', '-I', 'INPUT', '1', ...words])).code).toBe(0);
      expect(await taggedLines(names.ruleTag)).toHaveLength(RULES + 1);
      const s = await start();
      expect(await networkId(docker, names.network)).toBe(firstNetwork);
      const lines = await taggedLines(names.ruleTag);
      expect(lines).toHaveLength(RULES);
      expect(lines[0]).toContain('ESTABLISHED');
      expect(lines[RULES - 1]).toContain('REJECT');
      const { pid, gw } = await where(docker, sandbox);
      expect((await curlFrom(pid, `http://${gw}:3128/`)).stdout).toContain('absolute-form');
      const ran = await api(s.url, 'POST', `/api/v1/sandboxes/${sandbox}/exec`, { command: 'echo alive', timeout: '30s' });
      expect(ran.json?.stdout).toBe('alive\n');
      await s.kill9();
    }, 120_000);

    it('after kill -9 with no filtered container left, the next start removes the network and its rules', async () => {
      await removeInstallation(docker, installation);
      expect(await taggedLines(names.ruleTag)).toHaveLength(RULES);
      const s = await start();
      expect(await networkId(docker, names.network)).toBeNull();
      expect(await taggedLines(names.ruleTag)).toEqual([]);
      await s.stop();
      expect(await taggedLines(names.ruleTag)).toEqual([]);
    }, 120_000);
  },
);
