import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { EventBus } from '../core/events/bus.js';
import type { Provider } from '../core/ports.js';

export interface BuiltProviders {
  providers: Provider[];
  defaultName: string;
}

/** True when a Docker engine answers on the socket (bounded). */
async function dockerAnswers(socketPath: string): Promise<boolean> {
  if (!existsSync(socketPath)) return false;
  try {
    const { default: Docker } = await import('dockerode');
    const docker = new Docker({ socketPath, timeout: 2000 });
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

function prootUsable(binary: string, rootfs: string): boolean {
  if (!rootfs || !existsSync(join(rootfs, 'bin', 'sh'))) return false;
  const r = spawnSync(binary, ['--version'], { stdio: 'ignore', timeout: 3000 });
  return r.status === 0 || r.status === 1;
}

/**
 * Instantiates the configured providers. `auto` = docker if the engine answers, else proot if the
 * binary and rootfs exist, else mock (with a warning that mock runs commands on the host). The
 * mock provider is registered only when it is the default.
 */
export async function buildProviders(config: SbxConfig, installationId: string, bus: EventBus, log: Logger): Promise<BuiltProviders> {
  const pc = config.providers;
  const wanted = pc.default;
  const providers: Provider[] = [];

  const dockerOk = wanted === 'docker' || wanted === 'auto' ? await dockerAnswers(pc.docker.socket_path || '/var/run/docker.sock') : false;
  if (dockerOk || wanted === 'docker') {
    const { createDockerProvider } = await import('../adapters/providers/docker/index.js');
    providers.push(
      createDockerProvider({
        socketPath: pc.docker.socket_path || '/var/run/docker.sock',
        installationId,
        runtime: pc.docker.runtime,
        networkMode: pc.docker.network_mode,
        pidsLimit: pc.docker.pids_limit,
        addedCaps: pc.docker.added_caps,
        seccompProfile: pc.docker.seccomp_profile || undefined,
        readOnlyRootfs: pc.docker.read_only_rootfs,
        user: pc.docker.user || undefined,
        registryAuth: pc.docker.registry_auth,
        onPull: (e: { image: string; status: string; progress?: string }) => bus.publish({ type: 'image.pull', data: { image: e.image, status: e.status, progress: e.progress } }),
      }),
    );
  }
  const prootOk = pc.proot.rootfs !== '' && prootUsable(pc.proot.binary, pc.proot.rootfs);
  if (prootOk || wanted === 'proot') {
    const { createProotProvider } = await import('../adapters/providers/proot/index.js');
    providers.push(createProotProvider({ binary: pc.proot.binary, rootfs: pc.proot.rootfs, workDir: join(tmpdir(), `sbx-proot-${installationId}`) }));
  }

  let defaultName: string = wanted;
  if (wanted === 'auto') defaultName = dockerOk ? 'docker' : prootOk ? 'proot' : 'mock';
  if (defaultName === 'mock') {
    const { createMockProvider } = await import('../adapters/providers/mock/index.js');
    // Per installation by default, so two servers on one host never count each other's sandboxes.
    providers.push(createMockProvider({ rootDir: pc.mock.root_dir || join(tmpdir(), `sbx-mock-${installationId}`) }));
    log.warn('provider "mock" is the default: commands run directly on this host, without isolation');
  }
  if (!providers.some((p) => p.name === defaultName)) {
    throw new Error(`providers.default is "${defaultName}", but that provider is not available on this node`);
  }
  return { providers, defaultName };
}
