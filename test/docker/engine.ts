import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { createDockerProvider, LABEL_INSTALLATION } from '../../src/adapters/providers/docker/index.js';
import type { DockerProviderOptions } from '../../src/adapters/providers/docker/index.js';
import type { Provider } from '../../src/core/ports.js';

/** Docker suites are mandatory with SBX_TEST_DOCKER=1 and skipped (with this reason) without it. */
export const DOCKER_SKIP = process.env.SBX_TEST_DOCKER === '1' ? undefined : 'SBX_TEST_DOCKER is not 1 (run scripts/test-docker-up.sh, then SBX_TEST_DOCKER=1)';
export const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
export const TEST_IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';

/** Suite title that says why it was skipped. */
export function dockerTitle(title: string): string {
  return DOCKER_SKIP ? `${title} (skipped: ${DOCKER_SKIP})` : title;
}

/** A client for the engine; fails loudly when the engine or the test image is absent. */
export async function requireEngine(): Promise<Docker> {
  const docker = new Docker({ socketPath: SOCKET });
  try {
    await docker.ping();
  } catch {
    throw new Error(`SBX_TEST_DOCKER=1 but no docker engine answers on ${SOCKET}: run scripts/test-docker-up.sh`);
  }
  try {
    await docker.getImage(TEST_IMAGE).inspect();
  } catch {
    throw new Error(`test image ${TEST_IMAGE} is missing: run scripts/test-docker-up.sh`);
  }
  return docker;
}

/** A fresh installation id per suite, so suites never see each other's containers. */
export function testInstallationId(): string {
  return `sbx-test-${randomBytes(5).toString('hex')}`;
}

export function testProvider(installationId: string, extra: Partial<DockerProviderOptions> = {}): Provider {
  return createDockerProvider({ socketPath: SOCKET, installationId, ...extra });
}

/** Force-removes every container labelled with the installation id (test teardown). */
export async function removeInstallation(docker: Docker, installationId: string): Promise<void> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTALLATION}=${installationId}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
}
