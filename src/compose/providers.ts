import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import { PROVIDER_CATALOGUE, wantedProviders, type FactoryContext } from '../adapters/providers/catalog.js';
import { parseDuration } from '../core/duration.js';
import { type DockerEndpoint, resolveDockerEndpoint } from '../config/docker-endpoint.js';
import type { EventBus } from '../core/events/bus.js';
import type { Provider } from '../core/ports/index.js';
import { NO_PROVIDER, NO_PROVIDER_MESSAGE } from '../core/providers/registry.js';

export interface BuiltProviders {
  providers: Provider[];
  defaultName: string;
}

/** True when a Docker engine answers at the endpoint (bounded). */
async function dockerAnswers(endpoint: DockerEndpoint): Promise<boolean> {
  if (endpoint.kind === 'unix' && !existsSync(endpoint.socketPath)) return false;
  try {
    const { default: Docker } = await import('dockerode');
    const { dockerodeOptions } = await import('../adapters/providers/docker/options.js');
    const docker = new Docker(dockerodeOptions(endpoint, { timeout: 2000 }) as never);
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

/** The engine endpoint as the docker CLI would pick it, or why it cannot be used. */
function dockerEndpoint(config: SbxConfig): DockerEndpoint | { error: string } {
  try {
    return resolveDockerEndpoint({ socketPath: config.providers.docker.socket_path, host: config.providers.docker.host, env: process.env });
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function prootUsable(binary: string, rootfs: string): boolean {
  if (!rootfs || !existsSync(join(rootfs, 'bin', 'sh'))) return false;
  const r = spawnSync(binary, ['--version'], { stdio: 'ignore', timeout: 3000 });
  return r.status === 0 || r.status === 1;
}

/**
 * Instantiates every provider the catalogue (adapters/providers/catalog.ts) asks for, side by side:
 * docker when an engine answers (or `providers.docker.enabled: true`), proot when its binary and
 * rootfs are usable (or `enabled: true`), mock only when named (`providers.default: mock` or
 * `providers.mock.enabled`, with a warning that it runs commands on the host); `enabled: false`
 * never; the kinds the catalogue builds from their settings alone (mock, custom-http) by its factory,
 * when enabled or named. `auto` = docker, else proot, else none (`serve` starts; spawns answer 503 saying how). Docker is found
 * where the docker CLI finds it (resolveDockerEndpoint), never falling back to another engine.
 */
export async function buildProviders(config: SbxConfig, installationId: string, bus: EventBus, log: Logger): Promise<BuiltProviders> {
  const pc = config.providers;
  const wanted = pc.default;
  const want = wantedProviders(pc);
  const providers: Provider[] = [];

  const endpoint = want.docker !== 'off' ? dockerEndpoint(config) : undefined;
  const dockerOk = endpoint && !('error' in endpoint) ? await dockerAnswers(endpoint) : false;
  if (endpoint && 'error' in endpoint) {
    // Never a fallback to another engine: docker is then unusable, with this reason.
    if (want.docker === 'required') {
      log.warn(`docker: ${endpoint.error}`);
      const { createUnusableDockerProvider } = await import('../adapters/providers/docker/index.js');
      providers.push(createUnusableDockerProvider(endpoint.error));
    } else if (wanted === 'auto') {
      log.warn(`docker: ${endpoint.error}`);
    }
  } else if (endpoint && !dockerOk && (want.docker === 'required' || wanted === 'auto')) {
    log.warn(`docker: no engine answers at ${endpoint.description}`);
  }
  if (endpoint && !('error' in endpoint) && (dockerOk || want.docker === 'required')) {
    const { createDockerProvider } = await import('../adapters/providers/docker/index.js');
    providers.push(
      createDockerProvider({
        endpoint,
        installationId,
        runtime: pc.docker.runtime,
        networkMode: pc.docker.network_mode,
        pidsLimit: pc.docker.pids_limit,
        addedCaps: pc.docker.added_caps,
        seccompProfile: pc.docker.seccomp_profile || undefined,
        readOnlyRootfs: pc.docker.read_only_rootfs,
        user: pc.docker.user || undefined,
        registryAuth: pc.docker.registry_auth,
        agent: pc.docker.agent,
        // Per-container socket directories; kept across restarts so adopted containers keep theirs.
        agentDir: join(tmpdir(), `sbx-agent-${installationId}`),
        onPull: (e: { image: string; status: string; progress?: string }) =>
          bus.publish({ type: 'image.pull', data: { image: e.image, status: e.status, progress: e.progress } }),
      }),
    );
  }
  let prootOk = want.proot !== 'off' && pc.proot.rootfs !== '' && prootUsable(pc.proot.binary, pc.proot.rootfs);
  if (prootOk || want.proot === 'required') {
    const { createProotProvider } = await import('../adapters/providers/proot/index.js');
    const { probeIsolation, unisolatedWarning } = await import('../adapters/providers/shared/isolation.js');
    const iso = await probeIsolation();
    if (!iso.isolated && config.auth.enabled && !pc.proot.allow_unisolated) {
      // Sandboxes that can read the server's environment and kill it defeat auth: opt in explicitly.
      const why =
        `proot refuses to start: ${unisolatedWarning(iso)}; with auth on, set ` + `providers.proot.allow_unisolated: true to run it anyway`;
      if (want.proot === 'required') throw new Error(why);
      log.warn(why);
      prootOk = false;
    } else {
      if (!iso.isolated) log.warn(`proot: ${unisolatedWarning(iso)}`);
      providers.push(
        createProotProvider({
          binary: pc.proot.binary,
          rootfs: pc.proot.rootfs,
          workDir: join(tmpdir(), `sbx-proot-${installationId}`),
          installationId,
        }),
      );
    }
  }

  let defaultName: string = wanted;
  // auto picks by the catalogue's rank among what runs (never mock); none → spawns answer 503.
  if (wanted === 'auto') {
    const usable: Record<string, boolean> = { docker: dockerOk, proot: prootOk };
    const pick = PROVIDER_CATALOGUE.filter((e) => e.autoRank !== null && usable[e.name]).sort((x, y) => x.autoRank! - y.autoRank!)[0];
    defaultName = pick?.name ?? NO_PROVIDER;
  }
  if (defaultName === NO_PROVIDER) log.warn(NO_PROVIDER_MESSAGE);
  const ctx: FactoryContext = {
    installationId,
    durationMs: (text) => parseDuration(text, 'duration'),
    scratchDir: (name) => join(tmpdir(), `${name}-${installationId}`),
  };
  // Every other kind the settings ask for, built by the catalogue's factory.
  for (const entry of PROVIDER_CATALOGUE) {
    if (!entry.create || want[entry.name] !== 'required') continue;
    providers.push(await entry.create(pc, ctx));
    if (entry.notice) log.warn(`provider "${entry.name}" is ${defaultName === entry.name ? 'the default' : 'enabled'}: ${entry.notice}`);
  }
  if (defaultName !== NO_PROVIDER && !providers.some((p) => p.name === defaultName)) {
    throw new Error(`providers.default is "${defaultName}", but that provider is not available on this node`);
  }
  return { providers, defaultName };
}
