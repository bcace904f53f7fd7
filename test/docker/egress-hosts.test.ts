/**
 * The egress gateway resolves as the host does (DESIGN.md §10): the hosts file first, then DNS.
 * A real `sbx serve` runs in a mount namespace of its own (`unshare -m`) whose /etc/hosts is a
 * bind-mounted file of this test, so only it knows the names there: one maps to an upstream in a
 * network namespace (198.18.x.2, a test range that is not special), one to 127.0.0.1 (special). A
 * filtered docker sandbox reaches the first, is refused the second as `special_address`, and a
 * name added to the file later is found once the gateway reads it again. Needs root, docker,
 * namespaces and a built dist/: SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames } from '../../src/adapters/providers/docker/egress.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { sh, startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { tempDir } from '../helpers/tmp.js';
import { api, BIN, ensureBuilt, installationOf, until } from '../reliability/harness.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and namespaces)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxeh${process.pid}`;
const VETH = `sbxeh${tag}h`;
const NET = `198.18.${tag}`;
const UP = `${NET}.2`;
const HOSTS = `127.0.0.1 localhost\n${UP}\tinternal.hosts.test Alias.Hosts.TEST # only this file knows them\n127.0.0.1 loop.hosts.test\n`;

const SERVER = `
require('node:http').createServer((req, res) => res.end('upstream ' + req.headers.host + ' ' + req.url)).listen(80, process.argv[2]);
process.stdout.write('ready\\n');
`;

/** `sbx serve` in a mount namespace of its own, with `hosts` bind-mounted on /etc/hosts there. */
async function serveWithHosts(home: string, hosts: string): Promise<{ child: ChildProcess; url: string; log: () => string }> {
  mkdirSync(join(home, '.sbx'), { recursive: true });
  const config = { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 }, logging: { format: 'json' } };
  writeFileSync(join(home, '.sbx', 'config.yaml'), JSON.stringify(config));
  const child = spawn(
    'unshare',
    [
      '-m',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount --bind "$1" /etc/hosts && exec "$2" "$3" serve --port 0',
      'sh',
      hosts,
      process.execPath,
      BIN,
    ],
    { cwd: home, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) return { child, url: m[1]!, log: () => out };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx serve did not start in its mount namespace:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(SKIP !== undefined)(dockerTitle(`egress through the hosts file${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`), () => {
  let docker: Docker;
  let dir: string;
  let hostsPath: string;
  let upstream: NetnsUpstream | undefined;
  let srv: { child: ChildProcess; url: string; log: () => string } | undefined;
  let installation = '';
  let id = '';

  const exec = async (command: string) =>
    (await api(srv!.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '30s' })).json as {
      exit_code: number;
      stdout: string;
      stderr: string;
    };

  beforeAll(async () => {
    docker = await requireEngine();
    ensureBuilt();
    dir = tempDir('sbx-egress-hosts-');
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [UP]);
    hostsPath = join(dir, 'hosts');
    writeFileSync(hostsPath, HOSTS);
    srv = await serveWithHosts(join(dir, 'home'), hostsPath);
    installation = await installationOf(join(dir, 'home'));
    const res = await api(srv.url, 'POST', '/api/v1/sandboxes', {
      network: 'filtered',
      egress: { allow: ['internal.hosts.test', 'alias.hosts.test', 'loop.hosts.test', 'later.hosts.test'] },
    });
    expect(res.status, res.text).toBe(201);
    id = res.json.id;
  }, 180_000);

  afterAll(async () => {
    if (srv) {
      const exited = new Promise((r) => srv!.child.once('exit', r));
      srv.child.kill('SIGKILL');
      await exited;
    }
    if (installation) {
      const names = filteredNames({ installationId: installation });
      await removeInstallation(docker, installation);
      await docker
        .getNetwork(names.network)
        .remove()
        .catch(() => undefined);
      await removeTaggedRules(names.ruleTag);
    }
    await upstream?.close();
  }, 60_000);

  it('only the served process sees this hosts file (control)', async () => {
    expect((await sh('getent', ['hosts', 'internal.hosts.test'])).code).not.toBe(0);
  });

  it('a name only the hosts file knows is reached through the gateway; names compare case-insensitively', async () => {
    const r = await exec('wget -q -O - http://internal.hosts.test/from-hosts');
    expect(r.stdout).toBe('upstream internal.hosts.test /from-hosts');
    const alias = await exec('wget -q -O - http://alias.hosts.test/alias');
    expect(alias.stdout).toBe('upstream alias.hosts.test /alias');
  });

  it('a hosts-file name that maps into a special range is refused as special_address', async () => {
    const r = await exec('wget -q -O - http://loop.hosts.test/');
    expect(r.exit_code).not.toBe(0);
    const logs = await api(srv!.url, 'GET', `/api/v1/sandboxes/${id}/logs?lines=200`);
    expect((logs.json as string[]).join('\n')).toContain('sbx egress: denied loop.hosts.test:80 (special_address)');
  });

  it('a name added to the hosts file is found once the gateway reads it again', async () => {
    const before = await exec('wget -q -O - http://later.hosts.test/');
    expect(before.exit_code).not.toBe(0);
    const logs = await api(srv!.url, 'GET', `/api/v1/sandboxes/${id}/logs?lines=200`);
    expect((logs.json as string[]).join('\n')).toContain('sbx egress: denied later.hosts.test:80 (dns_failed)');
    // Written in place: the bind mount shows the same file.
    writeFileSync(hostsPath, `${HOSTS}${UP} later.hosts.test\n`);
    const after = await until(async () => {
      const r = await exec('wget -q -O - http://later.hosts.test/later');
      return r.stdout === 'upstream later.hosts.test /later' ? r : null;
    }, 10_000);
    expect(after?.stdout).toBe('upstream later.hosts.test /later');
  }, 30_000);
});
