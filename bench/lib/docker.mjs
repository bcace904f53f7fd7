// The docker benches' shared setup: the engine and image check, `sbx serve` on the docker provider in
// its own process, and the raw dockerode side (a container with sbx's hardening, an exec run to its end).
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Client } from '../../dist/index.js';
import { processes } from './procs.mjs';

export const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
export const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const KEEPALIVE = `mkdir -p /workspace 2>/dev/null; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`;

/**
 * The engine, once it answers and has the image; otherwise prints `heading` and a skip note as the
 * bench's report and exits 0.
 */
export async function requireDocker(heading) {
  const docker = new Docker({ socketPath: SOCKET });
  try {
    await docker.ping();
    await docker.getImage(IMAGE).inspect();
  } catch {
    console.log(`${heading}Skipped: no docker engine on ${SOCKET} or image ${IMAGE} missing (run scripts/test-docker-up.sh).\n`);
    process.exit(0);
  }
  return docker;
}

/**
 * `sbx serve` with the docker provider (SQLite store, 256 MB sandboxes) in its own process, with
 * `env` added to its settings; `stop()` ends it and removes its directory.
 */
export async function startDockerServe(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-'));
  const procs = processes(dir);
  const url = await procs.start(
    'serve',
    ['serve', '--host', '127.0.0.1', '--port', '0'],
    {
      SVC_DATABASE_PATH: join(dir, 'serve', 'sbx.db'),
      SVC_PROVIDERS_DEFAULT: 'docker',
      SVC_PROVIDERS_DOCKER_SOCKET_PATH: SOCKET,
      SVC_DEFAULTS_IMAGE: IMAGE,
      SVC_DEFAULTS_MEMORY_MB: '256',
      ...env,
    },
    /listening on (http:\/\/127\.0\.0\.1:\d+)/,
  );
  return {
    url,
    client: new Client({ url }),
    async stop() {
      await procs.stop();
      procs.cleanup();
    },
  };
}

/** Create options of a raw container with sbx's hardening, labelled `sbx.bench=<label>`, kept alive. */
export const hardened = (label, image = IMAGE) => ({
  name: `sbx-raw-${randomBytes(5).toString('hex')}`,
  Image: image,
  Entrypoint: ['/bin/sh', '-c'],
  Cmd: [KEEPALIVE],
  WorkingDir: '/workspace',
  Labels: { 'sbx.bench': label },
  HostConfig: {
    Memory: 256 * 2 ** 20,
    MemorySwap: 256 * 2 ** 20,
    NanoCpus: 1e9,
    PidsLimit: 256,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    NetworkMode: 'bridge',
    Init: true,
  },
});

/** Runs `cmd` (a shell command, or an argv) in a raw container through the engine's exec API, output drained; its exit code. */
export async function rawExec(container, cmd) {
  const argv = Array.isArray(cmd) ? cmd : ['/bin/sh', '-c', cmd];
  const exec = await container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ Detach: false, Tty: false });
  await new Promise((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
  return (await exec.inspect()).ExitCode;
}

/** Force-removes the raw containers (and, with `images`, the images) labelled `sbx.bench=<label>`. */
export async function removeLabelled(docker, label, { images = false } = {}) {
  const filters = { label: [`sbx.bench=${label}`] };
  for (const c of await docker.listContainers({ all: true, filters }))
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  if (!images) return;
  for (const img of await docker.listImages({ filters }))
    await docker
      .getImage(img.Id)
      .remove({ force: true })
      .catch(() => undefined);
}
