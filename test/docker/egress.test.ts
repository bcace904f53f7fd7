/**
 * Egress enforcement on docker (DESIGN.md §10), against the real engine, the real host firewall
 * and real upstreams: a network namespace joined by a veth pair holds an HTTP server, an HTTPS
 * server (openssl self-signed) and a server that never answers, at 198.18.x.2. Names come from a
 * resolver only this test's gateway uses. Clients run in a sandbox's own network namespace
 * (`nsenter --net=/proc/<pid>/ns/net` with the host's curl and openssl), so the source address is
 * the sandbox's. Needs root, docker and namespaces: SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames, filteredNetworkName } from '../../src/adapters/providers/docker/egress.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { call } from '../helpers/http.js';
import { sh, startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and network namespaces)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxeg${process.pid}`;
const VETH = `sbxeg${tag}h`;
const NET = `198.18.${tag}`;
const UP = `${NET}.2`;
const NAMES: Record<string, string[]> = { 'up.test': [UP], 'other.test': [UP], 'local.test': ['127.0.0.1'], 'zero.test': ['0.0.0.0'] };

const SERVER = `
const http = require('node:http'), https = require('node:https'), net = require('node:net'), fs = require('node:fs');
const dir = process.argv[2], host = process.argv[3];
const big = Buffer.alloc(10 * 1024 * 1024, 120);
const body = (req, res) => (req.url === '/big' ? res.end(big) : res.end('upstream ' + req.headers.host + ' ' + req.url));
http.createServer(body).listen(80, host);
https.createServer({ key: fs.readFileSync(dir + '/key.pem'), cert: fs.readFileSync(dir + '/cert.pem') }, body).listen(443, host);
net.createServer(() => {}).listen(8081, host); // accepts, never answers
process.stdout.write('ready\\n');
`;

describe.skipIf(SKIP !== undefined)(dockerTitle(`egress on docker${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`), () => {
  let docker: Docker;
  let srv: TestServer;
  let dir: string;
  let upstream: NetnsUpstream | undefined;
  const children: ChildProcess[] = [];
  let hostWeb: Server;
  let hostPort: number;
  let gw: string;
  let a: { id: string; pid: number; ip: string };
  let b: { id: string; pid: number; ip: string };
  let bridge: string;
  let bridgePid: number;

  const inNs = (pid: number, cmd: string, args: string[], timeoutMs = 30_000) =>
    sh('nsenter', [`--net=/proc/${pid}/ns/net`, cmd, ...args], timeoutMs);
  const curl = (pid: number, args: string[]) => inNs(pid, 'curl', ['-sS', '--max-time', '8', ...args]);
  const viaProxy = (pid: number, url: string, extra: string[] = []) => curl(pid, ['-x', `http://${gw}:3128`, ...extra, url]);
  const exec = async (id: string, command: string) =>
    (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '30s' })).body as {
      exit_code: number;
      stdout: string;
      stderr: string;
    };

  async function sandbox(body: unknown): Promise<{ id: string; pid: number; ip: string }> {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
    expect(res.status, res.text).toBe(201);
    const info = await docker.getContainer(`sbx-${res.body.id}`).inspect();
    const nets = Object.values(info.NetworkSettings.Networks);
    return { id: res.body.id as string, pid: info.State.Pid, ip: nets[0]?.IPAddress ?? '' };
  }

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-egress-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=up.test',
        '-addext',
        'subjectAltName=DNS:up.test,DNS:other.test',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [dir, UP]);
    // A host service on all addresses: a filtered sandbox must not reach it.
    hostWeb = createServer((_req, res) => res.end('host service'));
    await new Promise<void>((r) => hostWeb.listen(0, '0.0.0.0', r));
    hostPort = (hostWeb.address() as AddressInfo).port;
    srv = await startTestServer(
      { server: { host: '0.0.0.0' }, providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } },
      { egressResolve: async (name) => NAMES[name] ?? [] },
    );
    // The filtered network is made at the first filtered spawn (DESIGN §10).
    a = await sandbox({ egress: { allow: ['up.test', 'local.test', 'zero.test', 'other.test:443'] } });
    const net = await docker.getNetwork(filteredNetworkName(srv.plane.installationId)).inspect();
    gw = net.IPAM!.Config![0]!.Gateway!;
    b = await sandbox({ network: 'filtered', egress: { allow: ['up.test'] } });
    const br = await sandbox({ network: 'bridge' });
    bridge = br.id;
    bridgePid = br.pid;
  }, 120_000);

  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    hostWeb?.close();
    const installation = srv?.plane.installationId;
    // Sandboxes first: a shutdown with filtered containers still attached keeps the network and
    // its host rules (fail closed); with none left it takes both away.
    try {
      if (docker && installation) await removeInstallation(docker, installation);
      await srv?.close();
      if (installation) {
        const tag = filteredNames({ installationId: installation }).ruleTag;
        const rules = (await sh('iptables', ['-S', 'INPUT'])).stdout;
        await removeTaggedRules(tag);
        expect(rules).not.toContain(tag);
        const left = await docker
          .getNetwork(filteredNetworkName(installation))
          .inspect()
          .then(
            () => true,
            () => false,
          );
        await docker
          .getNetwork(filteredNetworkName(installation))
          .remove()
          .catch(() => undefined);
        expect(left).toBe(false);
      }
    } finally {
      // The upstream namespace and its server go even when an expectation above fails.
      await upstream?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('shows the network and the rules; the sandbox has the proxy variables', async () => {
    const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${a.id}`);
    expect(got.body.network).toBe('filtered');
    expect(got.body.egress.allow).toContain('up.test');
    const env = await exec(a.id, 'env | sort');
    expect(env.stdout).toContain(`HTTP_PROXY=http://${gw}:3128`);
    expect(env.stdout).toContain(`https_proxy=http://${gw}:3128`);
    expect(env.stdout).toContain('NO_PROXY=localhost,127.0.0.1');
  });

  it('an allowed name passes through the proxy and through CONNECT with the right SNI', async () => {
    const plain = await viaProxy(a.pid, 'http://up.test/hello');
    expect(plain.stdout).toBe('upstream up.test /hello');
    const tls = await viaProxy(a.pid, 'https://up.test/tls', ['--cacert', join(dir, 'cert.pem')]);
    expect(tls.stderr).toBe('');
    expect(tls.stdout).toBe('upstream up.test /tls');
    // busybox wget inside, with nothing but the proxy variables.
    const wget = await exec(a.id, 'wget -q -O - http://up.test/wget');
    expect(wget.stdout).toBe('upstream up.test /wget');
  });

  it('refuses a name not on the list, the bare address, special addresses and IP tricks', async () => {
    const denied = async (url: string, reason: string) => {
      const r = await viaProxy(a.pid, url);
      expect(r.stdout, url).toContain(`denied (${reason})`);
    };
    await denied('http://nope.test/', 'no_rule');
    await denied(`http://${UP}/`, 'no_rule');
    await denied('http://local.test/', 'special_address');
    await denied('http://zero.test/', 'special_address');
    await denied('http://0.0.0.0/', 'special_address');
    await denied('http://[::ffff:127.0.0.1]/', 'special_address');
    // curl would rewrite a decimal host itself: sent raw, the gateway refuses it as no name or address.
    const decimal = await inNs(a.pid, 'sh', [
      '-c',
      `printf 'GET http://2130706433/ HTTP/1.1\\r\\nHost: 2130706433\\r\\n\\r\\n' | timeout 5 busybox nc ${gw} 3128`,
    ]);
    expect(decimal.stdout).toMatch(/^HTTP\/1\.1 403[\s\S]*denied \(no_rule\)/);
    await denied(`http://127.0.0.1:${new URL(srv.url).port}/api/v1/sandboxes`, 'special_address');
  });

  it('each denial is a network.denied event, a console line and a counted verdict', async () => {
    await viaProxy(a.pid, 'http://counted.test/');
    await new Promise((r) => setTimeout(r, 200));
    const events = srv.plane.deps.bus.recent().filter((e) => e.type === 'network.denied' && e.sandbox_id === a.id);
    expect(events.map((e) => e.data)).toContainEqual({ sandbox_id: a.id, host: 'counted.test', port: 80, reason: 'no_rule' });
    const logs = await call(srv.url, 'GET', `/api/v1/sandboxes/${a.id}/logs?lines=200`);
    expect(logs.body.join('\n')).toContain('sbx egress: denied counted.test:80 (no_rule)');
    const metrics = (await call(srv.url, 'GET', '/api/v1/metrics/prometheus')).text;
    expect(metrics).toMatch(/sbx_egress_connections_total\{verdict="denied"\} [1-9]/);
    expect(metrics).toMatch(/sbx_egress_connections_total\{verdict="allowed"\} [1-9]/);
  });

  it('refuses a wrong or missing SNI unless the rule names the port', async () => {
    const sclient = (extra: string[]) =>
      inNs(a.pid, 'sh', ['-c', `echo | timeout 10 openssl s_client -proxy ${gw}:3128 -connect up.test:443 ${extra.join(' ')} 2>&1`]);
    const right = await sclient(['-servername', 'up.test']);
    expect(right.stdout).toMatch(/CN ?= ?up\.test/);
    const wrong = await sclient(['-servername', 'evil.test']);
    expect(wrong.stdout).not.toMatch(/Server certificate/);
    const none = await sclient(['-noservername']);
    expect(none.stdout).not.toMatch(/Server certificate/);
    // other.test:443 names the port: any bytes pass (here TLS with another SNI).
    const ported = await inNs(a.pid, 'sh', [
      '-c',
      `echo | timeout 10 openssl s_client -proxy ${gw}:3128 -connect other.test:443 -servername whatever.test 2>&1`,
    ]);
    expect(ported.stdout).toMatch(/Server certificate/);
  });

  it("direct connections fail: the upstream, and every host port but the gateway's", async () => {
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${UP}/`])).code).not.toBe(0);
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${gw}:${hostPort}/`])).code).not.toBe(0);
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${gw}:${new URL(srv.url).port}/api/v1/health`])).code).not.toBe(
      0,
    );
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${gw}:22/`])).code).not.toBe(0);
    // The gateway itself answers.
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${gw}:3128/`])).stdout).toContain('absolute-form');
    // From the host the service is there (control).
    expect((await sh('curl', ['-sS', '--max-time', '3', `http://127.0.0.1:${hostPort}/`])).stdout).toBe('host service');
  });

  it('DNS from inside fails; two filtered sandboxes cannot reach each other', async () => {
    const dns = await exec(a.id, 'nslookup up.test');
    expect(dns.exit_code).not.toBe(0);
    const direct = await inNs(a.pid, 'busybox', ['nslookup', 'up.test', gw], 10_000);
    expect(direct.stdout + direct.stderr).not.toContain(UP);
    const listener = spawn('nsenter', [`--net=/proc/${b.pid}/ns/net`, 'busybox', 'httpd', '-f', '-p', '8080', '-h', dir], {
      stdio: 'ignore',
    });
    children.push(listener);
    await new Promise((r) => setTimeout(r, 500));
    expect(
      (await curl(b.pid, ['--noproxy', '*', '--max-time', '3', '-o', '/dev/null', '-w', '%{http_code}', 'http://127.0.0.1:8080/cert.pem']))
        .stdout,
    ).toBe('200');
    expect((await curl(a.pid, ['--noproxy', '*', '--max-time', '3', `http://${b.ip}:8080/cert.pem`])).code).not.toBe(0);
    listener.kill('SIGKILL');
  });

  it('a bridge sandbox still reaches the upstream (control)', async () => {
    const r = await exec(bridge, `wget -q -O - http://${UP}/bridge`);
    expect(r.stdout).toBe(`upstream ${UP} /bridge`);
  });

  it('malformed requests get 400 and the gateway stays up; a flood is bounded', async () => {
    const raw = (text: string) => inNs(a.pid, 'sh', ['-c', `printf '${text}' | timeout 5 busybox nc ${gw} 3128`]);
    expect((await raw('GARBAGE\\r\\n\\r\\n')).stdout).toMatch(/^HTTP\/1\.1 400/);
    expect((await raw('CONNECT nonsense HTTP/1.1\\r\\n\\r\\n')).stdout).toMatch(/^HTTP\/1\.1 400/);
    expect((await raw('CONNECT up.test:99999 HTTP/1.1\\r\\n\\r\\n')).stdout).toMatch(/^HTTP\/1\.1 400/);
    const flood = `
      const net = require('node:net'); let c503 = 0, open = 0; const socks = [];
      for (let i = 0; i < 300; i++) { const s = net.connect(3128, '${gw}'); socks.push(s);
        s.on('connect', () => open++);
        s.on('data', (d) => { if (String(d).startsWith('HTTP/1.1 503')) c503++; }); s.on('error', () => {}); }
      setTimeout(() => { console.log(JSON.stringify({ c503, open })); socks.forEach((s) => s.destroy()); }, 3000);`;
    const out = await inNs(a.pid, process.execPath, ['-e', flood]);
    const { c503 } = JSON.parse(out.stdout) as { c503: number };
    expect(c503).toBeGreaterThanOrEqual(40);
    // Another sandbox is unaffected, and so is this one afterwards.
    expect((await viaProxy(b.pid, 'http://up.test/b')).stdout).toBe('upstream up.test /b');
    await new Promise((r) => setTimeout(r, 300));
    expect((await viaProxy(a.pid, 'http://up.test/after')).stdout).toBe('upstream up.test /after');
  });

  it('50 concurrent connections work while a stalled upstream hangs', async () => {
    const stalled = inNs(a.pid, 'curl', ['-sS', '--max-time', '15', '-x', `http://${gw}:3128`, 'http://up.test:8081/']);
    const many = await inNs(
      a.pid,
      'sh',
      ['-c', `seq 50 | xargs -P 50 -I{} curl -sS --max-time 10 -x http://${gw}:3128 http://up.test/n{} ; echo`],
      30_000,
    );
    const lines = many.stdout.split('upstream up.test /n').length - 1;
    expect(lines).toBe(50);
    expect((await stalled).code).not.toBe(0);
  }, 40_000);

  it('10 MiB through the gateway vs from a bridge sandbox (benchmark row, one run)', async () => {
    const time = async (pid: number, args: string[]) => {
      const r = await inNs(pid, 'curl', ['-sS', '--max-time', '30', '-o', '/dev/null', '-w', '%{time_total} %{size_download}', ...args]);
      const [t, n] = r.stdout.trim().split(' ');
      expect(Number(n)).toBe(10 * 1024 * 1024);
      return Number(t) * 1000;
    };
    const runs = async (pid: number, args: string[]) => {
      const ms: number[] = [];
      for (let i = 0; i < 5; i++) ms.push(await time(pid, args));
      return ms.sort((x, y) => x - y)[2]!;
    };
    const direct = await runs(bridgePid, [`http://${UP}/big`]);
    const proxied = await runs(a.pid, ['-x', `http://${gw}:3128`, 'http://up.test/big']);
    const tunneled = await runs(a.pid, ['-x', `http://${gw}:3128`, '--cacert', join(dir, 'cert.pem'), 'https://up.test/big']);
    const directTls = await runs(bridgePid, ['-k', `https://${UP}/big`]);
    console.log(
      `egress bench (median of 5): bridge http ${direct.toFixed(1)} ms, gateway http ${proxied.toFixed(1)} ms ` +
        `(${(proxied / direct).toFixed(2)}x); bridge https ${directTls.toFixed(1)} ms, gateway CONNECT ` +
        `${tunneled.toFixed(1)} ms (${(tunneled / directTls).toFixed(2)}x)`,
    );
  }, 60_000);

  it('a live PUT swaps the verdicts and closes a tunnel the new lists forbid', async () => {
    const c = await sandbox({ egress: { allow: ['up.test:443'] } });
    const tunnel = spawn(
      'nsenter',
      [`--net=/proc/${c.pid}/ns/net`, 'openssl', 's_client', '-proxy', `${gw}:3128`, '-connect', 'up.test:443', '-servername', 'up.test'],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    children.push(tunnel);
    let out = '';
    tunnel.stdout!.on('data', (d) => (out += String(d)));
    const exited = new Promise<number | null>((r) => tunnel.once('exit', (code) => r(code)));
    for (let i = 0; i < 50 && !/Server certificate/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
    expect(out).toMatch(/Server certificate/);
    const put = await call(srv.url, 'PUT', `/api/v1/sandboxes/${c.id}/egress`, { allow: ['other.test'] });
    expect(put.status).toBe(200);
    const closed = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
    expect(closed).toBe(true);
    expect((await viaProxy(c.pid, 'http://up.test/')).stdout).toContain('denied (no_rule)');
    expect((await viaProxy(c.pid, 'http://other.test/now')).stdout).toBe('upstream other.test /now');
    const bridgePut = await call(srv.url, 'PUT', `/api/v1/sandboxes/${bridge}/egress`, { allow: ['up.test'] });
    expect(bridgePut.status).toBe(409);
  });

  it('added NET_RAW/NET_ADMIN make filtered unavailable, with the reason', async () => {
    const other = await startTestServer({
      providers: { default: 'docker', docker: { added_caps: ['NET_RAW'] } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
    try {
      const res = await call(other.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' });
      expect(res.status).toBe(501);
      expect(res.body.message).toMatch(/NET_RAW/);
    } finally {
      await other.close();
    }
  });

  it('a shutdown with filtered sandboxes left keeps the network and its host rules', async () => {
    const other = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    const installation = other.plane.installationId;
    const name = filteredNetworkName(installation);
    try {
      expect((await call(other.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' })).status).toBe(201);
    } finally {
      await other.close();
    }
    const rules = () =>
      sh('iptables', ['-S', 'INPUT']).then(
        (r) => r.stdout.split('\n').filter((l) => l.includes(filteredNames({ installationId: installation }).ruleTag)).length,
      );
    expect(await rules()).toBe(6);
    // Cleaned up by hand here (the shutdown with none left is the suite's own afterAll).
    await removeInstallation(docker, installation);
    const { Firewall } = await import('../../src/transports/egress/firewall.js');
    const net = await docker.getNetwork(name).inspect();
    const cfg = net.IPAM!.Config![0]!;
    await new Firewall({
      subnet: cfg.Subnet!,
      gateway: cfg.Gateway!,
      port: 3128,
      tag: filteredNames({ installationId: installation }).ruleTag,
    }).remove();
    await docker.getNetwork(name).remove();
    expect(await rules()).toBe(0);
  });

  it('the firewall rules are tagged, present while serving', async () => {
    const rules = (await sh('iptables', ['-S', 'INPUT'])).stdout
      .split('\n')
      .filter((l) => l.includes(filteredNames({ installationId: srv.plane.installationId }).ruleTag));
    expect(rules).toHaveLength(6);
  });
});
