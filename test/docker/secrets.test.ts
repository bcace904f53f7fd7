/**
 * Secrets on docker (DESIGN.md §15), against the real engine: a filtered sandbox bound to a secret
 * holds only its placeholder — in the environment of its commands and of every process
 * (`/proc/* /environ`), in no file of its root filesystem, not in `docker inspect`, not in its
 * console — while the control plane's SecretSource gives the gateway the value for that
 * placeholder. Two sandboxes get different placeholders. A snapshot or fork image carries neither
 * the CA variables, the proxy nor a placeholder: a sandbox made from it gets them only when it is
 * itself filtered with secrets (its own bundle, fresh placeholders). Needs root and docker: SBX_TEST_DOCKER=1.
 */
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames } from '../../src/adapters/providers/docker/egress.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

// Written in two halves so that no command line below holds the value itself.
const HALF_A = 'docker-secret-';
const HALF_B = 'e4c2a8f61b3d';
const VALUE = HALF_A + HALF_B;
const ALICE = { 'x-user-id': 'alice' };

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('secrets in docker sandboxes'), () => {
  let docker: Docker;
  let srv: TestServer;
  let id: string;
  let other: string;
  const exec = async (sandbox: string, command: string) => {
    const res = await call(srv.url, 'POST', `/api/v1/sandboxes/${sandbox}/exec`, { command, timeout: '60s' }, ALICE);
    expect(res.status, res.text).toBe(200);
    return res.body as { exit_code: number; stdout: string; stderr: string };
  };

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    const made = await call(srv.url, 'POST', '/api/v1/secrets', { name: 'API_TOKEN', value: VALUE, hosts: ['api.example.com'] }, ALICE);
    expect(made.status, made.text).toBe(201);
    const spawn = async () => {
      const res = await call(
        srv.url,
        'POST',
        '/api/v1/sandboxes',
        { egress: { allow: ['api.example.com'] }, secrets: ['API_TOKEN'] },
        ALICE,
      );
      expect(res.status, res.text).toBe(201);
      expect(res.body.network).toBe('filtered');
      expect(res.text).not.toContain(VALUE);
      return res.body.id as string;
    };
    id = await spawn();
    other = await spawn();
  }, 120_000);

  afterAll(async () => {
    const installation = srv?.plane.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await srv?.close();
    if (installation) await removeTaggedRules(filteredNames({ installationId: installation }).ruleTag).catch(() => undefined);
  });

  it('commands see the placeholder, different per sandbox; the SecretSource maps it to the value', async () => {
    const mine = (await exec(id, 'printf %s "$API_TOKEN"')).stdout;
    const theirs = (await exec(other, 'printf %s "$API_TOKEN"')).stdout;
    expect(mine).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(theirs).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(mine).not.toBe(theirs);
    const bound = await srv.plane.deps.secretService!.forSandbox(id);
    expect(bound.map((b) => [b.name, b.placeholder, b.value])).toEqual([['API_TOKEN', mine, VALUE]]);
  });

  it('the value is in no environment, no file, not in docker inspect nor the console', async () => {
    // Both halves joined only inside the sandbox's shell, so the search's own arguments never hold it.
    const search = await exec(
      id,
      `A='${HALF_A}'; B='${HALF_B}'; sleep 30 & env > /tmp/env.txt; ` +
        'for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null | tr "\\0" "\\n"; done > /tmp/environs.txt; ' +
        'grep -c sbx_secret_ /tmp/env.txt; ' +
        'find / -xdev -type f 2>/dev/null | xargs grep -l "$A$B" 2>/dev/null; echo searched',
    );
    expect(search.exit_code).toBe(0);
    const lines = search.stdout.trim().split('\n');
    expect(lines[0]).toBe('1');
    expect(lines.slice(1)).toEqual(['searched']);
    const environs = await exec(id, 'cat /tmp/environs.txt; cat /proc/1/environ | tr "\\0" "\\n"');
    expect(environs.stdout).not.toContain(VALUE);
    expect(environs.stdout).toMatch(/API_TOKEN=sbx_secret_[0-9a-f]{32}/);
    const inspect = JSON.stringify(await docker.getContainer(`sbx-${id}`).inspect());
    expect(inspect).not.toContain(VALUE);
    const logs = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs`, undefined, ALICE);
    expect(logs.status).toBe(200);
    expect(logs.text).not.toContain(VALUE);
    const listed = await call(srv.url, 'GET', '/api/v1/secrets', undefined, ALICE);
    expect(listed.text).not.toContain(VALUE);
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('snapshots and forks of a filtered sandbox with secrets'), () => {
  let docker: Docker;
  let srv: TestServer;
  let parent: string;
  let parentToken: string;
  /** What sbx sets in a filtered sandbox (proxy and CA variables) — with a value, not a bare name that unsets it. */
  const SET_BY_SBX = /^(HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy|SSL_CERT_FILE|NODE_EXTRA_CA_CERTS|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE)=/;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, method, path, body, ALICE);
  const exec = async (sandbox: string, command: string) => {
    const res = await api('POST', `/api/v1/sandboxes/${sandbox}/exec`, { command, timeout: '60s' });
    expect(res.status, res.text).toBe(200);
    return res.body as { exit_code: number; stdout: string; stderr: string };
  };
  const imageEnv = async (image: string) => ((await docker.getImage(image).inspect()).Config?.Env ?? []) as string[];

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    const made = await api('POST', '/api/v1/secrets', { name: 'API_TOKEN', value: VALUE, hosts: ['api.example.com'] });
    expect(made.status, made.text).toBe(201);
    const res = await api('POST', '/api/v1/sandboxes', { egress: { allow: ['api.example.com'] }, secrets: ['API_TOKEN'] });
    expect(res.status, res.text).toBe(201);
    parent = res.body.id;
    parentToken = (await exec(parent, 'printf %s "$API_TOKEN"')).stdout;
    expect(parentToken).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect((await exec(parent, 'printf %s "$SSL_CERT_FILE"')).stdout).toBe('/etc/sbx/ca-bundle.crt');
  }, 120_000);

  afterAll(async () => {
    const installation = srv?.plane.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await srv?.close();
    if (installation) await removeTaggedRules(filteredNames({ installationId: installation }).ruleTag).catch(() => undefined);
  });

  it('a snapshot image holds no CA variable, proxy or placeholder; only a filtered sandbox with secrets from it gets them', async () => {
    const name = `sec-snap-${parent.slice(-8).toLowerCase()}`;
    const snap = await api('POST', `/api/v1/sandboxes/${parent}/snapshot`, { name });
    expect(snap.status, snap.text).toBe(201);
    const env = await imageEnv(snap.body.image);
    expect(env.filter((e) => SET_BY_SBX.test(e))).toEqual([]);
    expect(env.join('\n')).not.toContain('sbx_secret_');
    // The image's own variables stay.
    for (const e of await imageEnv(TEST_IMAGE)) expect(env).toContain(e);

    const plain = await api('POST', '/api/v1/sandboxes', { snapshot: name, network: 'none' });
    expect(plain.status, plain.text).toBe(201);
    const plainEnv = (await exec(plain.body.id, 'env')).stdout.split('\n');
    expect(plainEnv.filter((e) => SET_BY_SBX.test(e))).toEqual([]);
    expect(plainEnv.join('\n')).not.toContain('sbx_secret_');

    const filtered = await api('POST', '/api/v1/sandboxes', {
      snapshot: name,
      egress: { allow: ['api.example.com'] },
      secrets: ['API_TOKEN'],
    });
    expect(filtered.status, filtered.text).toBe(201);
    const token = (await exec(filtered.body.id, 'printf %s "$API_TOKEN"')).stdout;
    expect(token).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(token).not.toBe(parentToken);
    const ca = await exec(filtered.body.id, 'printf "%s\n" "$SSL_CERT_FILE" "$HTTPS_PROXY"; grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"');
    const [caFile, proxy, certs] = ca.stdout.trim().split('\n');
    expect(caFile).toBe('/etc/sbx/ca-bundle.crt');
    expect(proxy).toMatch(/^http:\/\/[0-9.]+:[0-9]+$/);
    expect(Number(certs)).toBeGreaterThanOrEqual(1);
  });

  it('a fork gets its own placeholder and bundle; its fork image holds neither', async () => {
    const res = await api('POST', `/api/v1/sandboxes/${parent}/fork`, {});
    expect(res.status, res.text).toBe(201);
    const child = res.body.sandboxes[0].id as string;
    const token = (await exec(child, 'printf %s "$API_TOKEN"')).stdout;
    expect(token).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(token).not.toBe(parentToken);
    const bound = await srv.plane.deps.secretService!.forSandbox(child);
    expect(bound.map((b) => [b.name, b.placeholder, b.value])).toEqual([['API_TOKEN', token, VALUE]]);
    expect((await exec(child, 'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"')).stdout.trim()).not.toBe('0');
    const image = (await docker.getContainer(`sbx-${child}`).inspect()).Image;
    const env = await imageEnv(image);
    expect(env.filter((e) => SET_BY_SBX.test(e))).toEqual([]);
    expect(env.join('\n')).not.toContain('sbx_secret_');
  });
});
