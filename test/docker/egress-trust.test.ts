/**
 * The trust bundle of filtered docker sandboxes (DESIGN.md §15), against the real engine: the
 * image's CA bundle plus the node's CA, on the host under the data dir, bind-mounted read-only at
 * /etc/sbx/ca-bundle.crt with the four CA variables pointing at it; never in the image (a
 * snapshot does not carry it); gone with the sandbox. The image with a CA bundle is this test's
 * own, committed from the test image with a certificate at /etc/ssl/certs/ca-certificates.crt.
 * Needs root and docker: SBX_TEST_DOCKER=1.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNames } from '../../src/adapters/providers/docker/egress.js';
import { NodeCa } from '../../src/adapters/system/tls-ca.js';
import { removeTaggedRules } from '../../src/transports/egress/firewall.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE } from './engine.js';

const IMAGE_WITH_CA = `sbx-test/busybox-ca:${process.pid}`;
const VARS = ['SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'];

/** The test image with `pem` at /etc/ssl/certs/ca-certificates.crt, committed as IMAGE_WITH_CA. */
async function imageWithCa(docker: Docker, pem: string): Promise<void> {
  const c = await docker.createContainer({ Image: TEST_IMAGE, Cmd: ['true'] });
  try {
    const pack = tar.pack();
    pack.entry({ name: 'etc/ssl/certs/ca-certificates.crt', mode: 0o644 }, pem);
    pack.finalize();
    await c.putArchive(pack as never, { path: '/' });
    await c.commit({ repo: IMAGE_WITH_CA.split(':')[0], tag: IMAGE_WITH_CA.split(':')[1] });
  } finally {
    await c.remove({ force: true });
  }
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('trust bundle of filtered sandboxes'), () => {
  let docker: Docker;
  let srv: TestServer;
  let imagePem = '';

  const exec = async (id: string, command: string) =>
    (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '30s' })).body as {
      exit_code: number;
      stdout: string;
      stderr: string;
    };
  const spawn = async (body: unknown) => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
    expect(res.status, res.text).toBe(201);
    return res.body.id as string;
  };

  beforeAll(async () => {
    docker = await requireEngine();
    imagePem = (await NodeCa.open(join(tempDir('sbx-image-ca-'), 'ca'), 'an image CA')).certPem;
    await imageWithCa(docker, imagePem);
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
  }, 120_000);

  afterAll(async () => {
    const installation = srv?.plane.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await srv?.close();
    if (installation) {
      const names = filteredNames({ installationId: installation });
      await docker
        .getNetwork(names.network)
        .remove()
        .catch(() => undefined);
      await removeTaggedRules(names.ruleTag);
    }
    await docker
      ?.getImage(IMAGE_WITH_CA)
      .remove({ force: true })
      .catch(() => undefined);
  }, 60_000);

  it('a filtered sandbox gets the node CA in a read-only bundle and the four variables; inspect shows no key', async () => {
    const id = await spawn({ network: 'filtered', egress: { allow: ['example.test'] } });
    const caDir = join(srv.dir, '.sbx', 'egress-ca');
    const nodeCa = readFileSync(join(caDir, 'ca.crt'), 'utf8');
    expect(statSync(join(caDir, 'ca.key')).mode & 0o777).toBe(0o600);
    const info = await docker.getContainer(`sbx-${id}`).inspect();
    const mount = info.Mounts.find((m) => m.Destination === '/etc/sbx/ca-bundle.crt');
    expect(mount).toMatchObject({ Type: 'bind', RW: false, Source: join(caDir, 'bundles', `${id}.crt`) });
    for (const v of VARS) expect(info.Config.Env).toContain(`${v}=/etc/sbx/ca-bundle.crt`);
    const text = JSON.stringify(info);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).not.toContain(readFileSync(join(caDir, 'ca.key'), 'utf8').split('\n')[1]);
    // Inside: the test image has no CA bundle, so the node CA alone; the sandbox cannot change it.
    const cat = await exec(id, 'cat /etc/sbx/ca-bundle.crt');
    expect(cat.stdout).toBe(nodeCa);
    expect((await exec(id, 'echo x >> /etc/sbx/ca-bundle.crt')).exit_code).not.toBe(0);
    expect((await exec(id, 'env')).stdout).toContain('CURL_CA_BUNDLE=/etc/sbx/ca-bundle.crt');
    // The injection counter is exported (no secret is bound here: it stays 0, and carries no name label).
    const metrics = (await call(srv.url, 'GET', '/api/v1/metrics/prometheus')).text;
    expect(metrics).toMatch(/^sbx_egress_secret_injections_total 0$/m);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    expect(existsSync(join(caDir, 'bundles', `${id}.crt`))).toBe(false);
  });

  it("an image's own CA bundle comes first, the node CA last; a bridge sandbox gets neither", async () => {
    const id = await spawn({ network: 'filtered', image: IMAGE_WITH_CA, egress: { allow: ['example.test'] } });
    const nodeCa = readFileSync(join(srv.dir, '.sbx', 'egress-ca', 'ca.crt'), 'utf8');
    const bundle = (await exec(id, 'cat /etc/sbx/ca-bundle.crt')).stdout;
    expect(bundle.startsWith(imagePem)).toBe(true);
    expect(bundle.endsWith(nodeCa)).toBe(true);
    // The image's own file is as it was.
    expect((await exec(id, 'cat /etc/ssl/certs/ca-certificates.crt')).stdout).toBe(imagePem);
    const bridge = await spawn({ network: 'bridge' });
    const info = await docker.getContainer(`sbx-${bridge}`).inspect();
    expect(info.Mounts.some((m) => m.Destination === '/etc/sbx/ca-bundle.crt')).toBe(false);
    expect((info.Config.Env ?? []).some((e) => e.startsWith('SSL_CERT_FILE='))).toBe(false);
  });
});
