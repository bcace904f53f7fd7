import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createDockerProvider, LABEL_INSTALLATION } from '../../src/adapters/providers/docker/index.js';
import type { DockerProviderOptions } from '../../src/adapters/providers/docker/index.js';
import type { Provider } from '../../src/core/ports/index.js';

/** Docker suites are mandatory with SBX_TEST_DOCKER=1 and skipped (with this reason) without it. */
export const DOCKER_SKIP =
  process.env.SBX_TEST_DOCKER === '1' ? undefined : 'SBX_TEST_DOCKER is not 1 (run scripts/test-docker-up.sh, then SBX_TEST_DOCKER=1)';
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
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  // The agent's socket directories (the provider's default place for this installation).
  rmSync(join(tmpdir(), `sbx-agent-${installationId}`), { recursive: true, force: true });
}

/**
 * A unix-socket relay in front of the engine. It records each request line passing through it, so
 * a test can assert how many engine calls an operation costs; closing it is, to sbx, the engine
 * going away mid-run, and opening it again brings the engine back.
 */
export class EngineTap {
  readonly path: string;
  readonly requests: string[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(dir: string) {
    this.path = join(dir, 'engine-tap.sock');
  }

  async open(): Promise<void> {
    const server = createServer((client) => {
      const engine = createConnection(SOCKET);
      for (const s of [client, engine]) {
        this.sockets.add(s);
        // Either side going away closes the other, as a direct connection would: the engine
        // must see sbx hang up (e.g. a read refused mid-transfer) or it keeps writing.
        s.on('close', () => {
          this.sockets.delete(s);
          (s === client ? engine : client).destroy();
        });
        s.on('error', () => undefined);
      }
      client.on('data', (chunk: Buffer) => {
        // Request lines only: bodies in these tests never hold one.
        for (const m of chunk.toString('latin1').matchAll(/(?:^|\n)(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP\/1\.1\r\n/g)) {
          this.requests.push(`${m[1]} ${m[2]!.replace(/^\/v[\d.]+/, '').replace(/\?.*$/, '')}`);
        }
      });
      client.pipe(engine).pipe(client);
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.path, resolve));
    this.server = server;
  }

  /** The requests recorded since the last call (and forgets them). */
  take(): string[] {
    return this.requests.splice(0);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Runs a command through the engine (docker exec), as root unless `user`: the test's own hands in the container. */
export async function engineRun(docker: Docker, runtimeId: string, cmd: string, user?: string): Promise<{ out: string; code: number }> {
  const exec = await docker
    .getContainer(runtimeId)
    .exec({ Cmd: ['/bin/sh', '-c', cmd], AttachStdout: true, AttachStderr: true, ...(user ? { User: user } : {}) });
  const stream = await exec.start({ Detach: false, Tty: false });
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
  // Frames: 8-byte headers before each chunk; the payloads are what the tests read.
  const raw = Buffer.concat(chunks);
  let out = '';
  for (let at = 0; at + 8 <= raw.length; ) {
    const len = raw.readUInt32BE(at + 4);
    out += raw.subarray(at + 8, at + 8 + len).toString();
    at += 8 + len;
  }
  const info = await exec.inspect();
  return { out, code: info.ExitCode ?? -1 };
}
