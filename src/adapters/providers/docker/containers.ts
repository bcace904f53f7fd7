import type Docker from 'dockerode';
import { badRequest, isAbortError, notFound, SbxError } from '../../../core/errors.js';
import type { PreviewUpstream, ProviderHealth, RuntimeInfo, RuntimeStatus, SpawnResult, SpawnSpec } from '../../../core/ports/index.js';
import { putDirectory } from './archive.js';
import { bounded, call, engineMessage, isNotFound, statusOf, toSbxError } from './errors.js';
import type { ImageCache } from './images.js';
import { type ContainerUser, type ResolvedOptions, WORKDIR } from './options.js';
import type { FilteredCreate } from './egress.js';
import { refuseSnapshotImage } from './snapshots.js';

/** tmpfs options that give a mount to the configured user (the mount is root's otherwise). */
function tmpfsOwner(user: ContainerUser | undefined): string {
  if (!user) return '';
  return `,uid=${user.uid}${user.gid !== undefined ? `,gid=${user.gid}` : ''}`;
}

export const LABEL_SANDBOX = 'sbx.sandbox_id';
export const LABEL_INSTALLATION = 'sbx.installation_id';
export const LABEL_OWNER = 'sbx.owner_id';

/**
 * PID 1 is docker-init (Init: true), which reaps zombies; its child idles in `wait` so TERM ends
 * it at once (a plain `sleep` would ignore the signal until the stop timeout).
 */
const keepalive = (agent = '') => `mkdir -p ${WORKDIR} 2>/dev/null; trap 'exit 0' TERM INT; ${agent}while :; do sleep 3600 & wait $!; done`;

/** The agent's part of a container (agent.ts): mounts, labels and its start line beside the keep-alive. */
export interface AgentPart {
  mounts: Docker.MountSettings[];
  labels: Record<string, string>;
  start: string;
}

const MIB = 1024 * 1024;

// @types/dockerode omits the options argument (with abortSignal) that dockerode accepts here.
type Signalled<T> = (opts: { abortSignal?: AbortSignal }) => Promise<T>;
const ping = (d: Docker, s: AbortSignal) => (d.ping as unknown as Signalled<unknown>).call(d, { abortSignal: s });
const engineInfo = (d: Docker, s: AbortSignal) =>
  (d.info as unknown as Signalled<{ MemTotal?: number; NCPU?: number }>).call(d, { abortSignal: s });

/** Container name for a sandbox: one container per sandbox id. */
export function containerName(sandboxId: string): string {
  return `sbx-${sandboxId}`;
}

/** Spawn, destroy, status and inventory of sandbox containers. */
export class Containers {
  private engineInfo: Promise<{ memTotal: number; ncpu: number }> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly opts: ResolvedOptions,
    private readonly images: ImageCache,
  ) {}

  /**
   * `mounts`: the spawn's volumes, already checked (volumes.ts); `agentFor`: the agent's part for a
   * container whose image has this `User` (none: no agent); `filtered`: a filtered spawn's network,
   * DNS and proxy variables (egress.ts).
   */
  async spawn(
    spec: SpawnSpec,
    signal?: AbortSignal,
    volumeMounts: Docker.MountSettings[] = [],
    agentFor?: (imageUser: string) => AgentPart | undefined,
    filtered?: FilteredCreate,
  ): Promise<SpawnResult> {
    await this.validateSize(spec, signal);
    // A snapshot's image only through `snapshot` (checked by the caller); every other image is judged by name, then by labels.
    const viaSnapshot = spec.snapshot !== undefined || spec.fork !== undefined;
    if (!viaSnapshot) refuseSnapshotImage(spec.image, null);
    const image = await this.images.ensure(spec.image, signal);
    if (!viaSnapshot) refuseSnapshotImage(spec.image, image.labels);
    const agent = agentFor?.(image.user);
    const mounts = [...volumeMounts, ...(agent?.mounts ?? []), ...(filtered?.mounts ?? [])];
    const { opts } = this;
    const labels: Record<string, string> = { [LABEL_SANDBOX]: spec.sandbox_id, [LABEL_INSTALLATION]: opts.installationId };
    // An image committed from a sandbox carries its owner label: the new owner (or none) replaces it.
    if (spec.owner_id || viaSnapshot) labels[LABEL_OWNER] = spec.owner_id ?? '';
    if (agent) Object.assign(labels, agent.labels);
    const memory = spec.memory_mb * MIB;
    // The spawn's network (DESIGN §10), else providers.docker.network_mode; filtered: the internal network.
    const networkMode = filtered ? filtered.networkMode : (spec.network ?? opts.networkMode);
    const hostConfig: Docker.HostConfig = {
      Memory: memory,
      MemorySwap: memory, // equal to Memory: no swap beyond the limit
      NanoCpus: Math.round(spec.vcpus * 1e9),
      PidsLimit: opts.pidsLimit,
      CapDrop: ['ALL'],
      CapAdd: opts.addedCaps.length > 0 ? opts.addedCaps : undefined,
      SecurityOpt: ['no-new-privileges', ...(opts.seccompOpt ? [opts.seccompOpt] : [])],
      NetworkMode: networkMode,
      // DESIGN §10: a filtered sandbox's DNS server is the gateway, which refuses every query.
      ...(filtered ? { Dns: filtered.dns } : {}),
      Init: true,
      ReadonlyRootfs: opts.readOnlyRootfs,
      ...(mounts.length > 0 ? { Mounts: mounts } : {}),
      Tmpfs: opts.readOnlyRootfs
        ? { '/tmp': 'rw,nosuid,nodev,mode=1777', [WORKDIR]: `rw,nosuid,nodev,exec,mode=0755${tmpfsOwner(opts.user)}` }
        : undefined,
      ...(opts.runtime ? { Runtime: opts.runtime } : {}),
    };
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        name: containerName(spec.sandbox_id),
        // The image judged above, by its id: a tag moved meanwhile cannot swap another one in.
        Image: image.id ?? spec.image,
        // Entrypoint too: an image's own entrypoint must not swallow the keep-alive.
        Entrypoint: ['/bin/sh', '-c'],
        Cmd: [keepalive(agent?.start)],
        WorkingDir: WORKDIR,
        ...(filtered ? { Env: filtered.env } : {}),
        Labels: labels,
        User: opts.user?.spec,
        Tty: false,
        OpenStdin: false,
        AttachStdout: false,
        AttachStderr: false,
        HostConfig: hostConfig,
        abortSignal: bounded(signal),
      } as Docker.ContainerCreateOptions);
    } catch (err) {
      if (signal?.aborted && isAbortError(err)) throw err;
      if (statusOf(err) === 409) throw new SbxError('conflict', `a container for sandbox ${spec.sandbox_id} already exists`);
      throw this.createError(err, spec.image);
    }
    try {
      // On a writable rootfs /workspace is the image's (or made by the engine), root's: hand it
      // to the user before anything runs. A read-only rootfs gets a tmpfs mounted as theirs.
      if (opts.user && !opts.readOnlyRootfs && opts.user.uid !== 0) {
        await putDirectory(this.docker, container.id, WORKDIR, 0o755, { uid: opts.user.uid, gid: opts.user.gid ?? 0 }, signal);
      }
    } catch (err) {
      await this.remove(container.id).catch(() => undefined);
      if (signal?.aborted && isAbortError(err)) throw err;
      throw new SbxError('provider_error', `spawn ${spec.image}: could not give ${WORKDIR} to user ${opts.user!.spec}`);
    }
    try {
      // Filtered (DESIGN §15): the trust bundle gets the image's CAs before anything runs.
      await filtered?.prepare?.(container.id, signal);
    } catch (err) {
      await this.remove(container.id).catch(() => undefined);
      if (signal?.aborted && isAbortError(err)) throw err;
      throw new SbxError('provider_error', `spawn ${spec.image}: could not write the sandbox's CA bundle`);
    }
    try {
      await container.start({ abortSignal: bounded(signal) });
    } catch (err) {
      // Never leave a created-but-dead container behind.
      await this.remove(container.id).catch(() => undefined);
      if (signal?.aborted && isAbortError(err)) throw err;
      throw this.startError(err, spec.image);
    }
    if (signal?.aborted) {
      await this.remove(container.id).catch(() => undefined);
      throw signal.reason;
    }
    return { runtime_id: container.id, network: filtered ? 'filtered' : networkMode };
  }

  /**
   * Client input (image, sizes) is checked before the create, so what the engine refuses here is
   * the server's own docker settings: a provider_error naming the setting, never engine text.
   */
  private createError(err: unknown, image: string): SbxError {
    const status = statusOf(err);
    const text = engineMessage(err);
    if (status === 400 && this.opts.runtime && /unknown runtime/i.test(text)) {
      return new SbxError(
        'provider_error',
        `spawn ${image}: the docker engine has no runtime "${this.opts.runtime}" (providers.docker.runtime)`,
      );
    }
    if (status === 400)
      return new SbxError('provider_error', `spawn ${image}: the docker engine refused the container settings (providers.docker.*)`);
    return toSbxError(err, `spawn ${image}`);
  }

  /** A network is looked up only when the container starts; so is the command. */
  private startError(err: unknown, image: string): SbxError {
    const text = engineMessage(err);
    const { networkMode } = this.opts;
    const custom = !['bridge', 'host', 'none', 'default'].includes(networkMode);
    if (/network .* not found/i.test(text) || (custom && isNotFound(err))) {
      return new SbxError(
        'provider_error',
        `spawn ${image}: network "${networkMode}" (providers.docker.network_mode) does not exist on the docker engine`,
      );
    }
    if (/no such file or directory|executable file not found/i.test(text)) {
      return new SbxError('provider_error', `spawn ${image}: the container did not start (does the image have /bin/sh?)`);
    }
    return new SbxError('provider_error', `spawn ${image}: the container did not start`);
  }

  /** Stop (bounded) then remove with anonymous volumes; a container already gone is fine. */
  /** Stops (TERM, 2 s grace) then removes; `graceful: false` removes at once (KILL), for runtimes nobody owns. */
  async destroy(runtimeId: string, signal?: AbortSignal, graceful = true): Promise<void> {
    if (!graceful) return this.remove(runtimeId, signal);
    const c = this.docker.getContainer(runtimeId);
    try {
      await c.stop({ t: 2, abortSignal: bounded(signal) });
    } catch (err) {
      if (isNotFound(err)) return;
      // 304 = already stopped; anything else: removal with force still does the job.
      if (signal?.aborted && isAbortError(err)) throw err;
    }
    await this.remove(runtimeId, signal);
  }

  private async remove(runtimeId: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.docker.getContainer(runtimeId).remove({ force: true, v: true, abortSignal: bounded(signal) });
    } catch (err) {
      // 404: gone; 409: removal already in progress (a concurrent destroy).
      if (isNotFound(err) || statusOf(err) === 409) return;
      throw toSbxError(err, 'destroy');
    }
  }

  /** A container's labels; undefined when it is gone. */
  async labels(runtimeId: string, signal?: AbortSignal): Promise<Record<string, string> | undefined> {
    try {
      const info = await this.docker.getContainer(runtimeId).inspect({ abortSignal: bounded(signal, 10_000) });
      return info.Config?.Labels ?? undefined;
    } catch {
      return undefined;
    }
  }

  async status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus> {
    try {
      const info = await this.docker.getContainer(runtimeId).inspect({ abortSignal: bounded(signal) });
      if (info.State?.Running && info.State?.Paused) return 'paused';
      return info.State?.Running ? 'running' : 'stopped';
    } catch (err) {
      if (isNotFound(err)) return 'missing';
      throw toSbxError(err, 'status');
    }
  }

  /**
   * Pause and resume (DESIGN.md §16): the engine's own (the cgroup freezer; memory stays). Both
   * idempotent: the engine's 409 for a container already in the asked state is success.
   */
  async pause(runtimeId: string, signal?: AbortSignal): Promise<void> {
    await this.freeze(runtimeId, true, signal);
  }

  async resume(runtimeId: string, signal?: AbortSignal): Promise<void> {
    await this.freeze(runtimeId, false, signal);
  }

  private async freeze(runtimeId: string, pause: boolean, signal?: AbortSignal): Promise<void> {
    const c = this.docker.getContainer(runtimeId);
    try {
      await (pause ? c.pause({ abortSignal: bounded(signal) }) : c.unpause({ abortSignal: bounded(signal) }));
    } catch (err) {
      if (isNotFound(err)) throw notFound('the sandbox runtime is gone');
      if (statusOf(err) === 409 || statusOf(err) === 500) {
        const now = await this.status(runtimeId, signal);
        if (now === (pause ? 'paused' : 'running')) return;
        if (now === 'stopped' || now === 'missing') throw new SbxError('conflict', `the sandbox runtime is ${now}`);
      }
      throw toSbxError(err, pause ? 'pause' : 'resume');
    }
  }

  /**
   * The container's address for a preview (DESIGN.md §9): its IP on its first network with one;
   * host networking shares this host's loopback; no network → `bad_gateway` saying so.
   */
  async previewUpstream(runtimeId: string, port: number, signal?: AbortSignal): Promise<PreviewUpstream> {
    let info: Docker.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(runtimeId).inspect({ abortSignal: bounded(signal) });
    } catch (err) {
      if (isNotFound(err)) throw notFound('the sandbox runtime is gone');
      throw toSbxError(err, 'status');
    }
    if (!info.State?.Running) throw new SbxError('bad_gateway', 'the sandbox is not running');
    const mode = info.HostConfig?.NetworkMode ?? '';
    if (mode === 'host') return { host: '127.0.0.1', port };
    if (mode === 'none') throw new SbxError('bad_gateway', 'the sandbox has no network (network mode none): nothing can reach its ports');
    const nets = Object.values(info.NetworkSettings?.Networks ?? {});
    const ip = nets.map((n) => n?.IPAddress).find((a) => typeof a === 'string' && a !== '');
    if (!ip) throw new SbxError('bad_gateway', 'the sandbox has no network address');
    return { host: ip, port };
  }

  /** Every container labelled with an sbx installation id (ours and other installations'). */
  async listRuntimes(signal?: AbortSignal): Promise<RuntimeInfo[]> {
    const list = await call(
      'list runtimes',
      (s) => this.docker.listContainers({ all: true, filters: { label: [LABEL_INSTALLATION] }, abortSignal: s }),
      signal,
    );
    return list
      .map((c) => ({
        runtime_id: c.Id,
        sandbox_id: c.Labels?.[LABEL_SANDBOX] ?? null,
        installation_id: c.Labels?.[LABEL_INSTALLATION] ?? null,
        status: (c.State === 'running' ? 'running' : c.State === 'paused' ? 'paused' : 'stopped') as RuntimeStatus,
      }))
      .sort((a, b) => (a.runtime_id < b.runtime_id ? -1 : 1));
  }

  /** Engine ping with latency; the error text is generic (no engine bodies). */
  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const started = performance.now();
    try {
      await ping(this.docker, bounded(signal, 5_000));
    } catch {
      return { healthy: false, latency_ms: Math.round(performance.now() - started), error: 'docker engine unreachable' };
    }
    const latency_ms = Math.round(performance.now() - started);
    try {
      const mine = await this.docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_INSTALLATION}=${this.opts.installationId}`] },
        abortSignal: bounded(signal, 5_000),
      });
      return { healthy: true, latency_ms, runtime_count: mine.length };
    } catch {
      return { healthy: true, latency_ms };
    }
  }

  private async validateSize(spec: SpawnSpec, signal?: AbortSignal): Promise<void> {
    if (!Number.isInteger(spec.memory_mb) || spec.memory_mb <= 0) throw badRequest('memory_mb must be a positive integer');
    if (!Number.isFinite(spec.vcpus) || spec.vcpus <= 0) throw badRequest('vcpus must be positive');
    // The engine itself refuses less than 6 MiB.
    if (spec.memory_mb < 6) throw badRequest('memory_mb must be at least 6 for docker sandboxes');
    const { memTotal, ncpu } = await this.info(signal);
    if (memTotal > 0 && spec.memory_mb * MIB > memTotal) {
      throw badRequest(`memory_mb ${spec.memory_mb} exceeds the docker host's memory (${Math.floor(memTotal / MIB)} MB)`);
    }
    if (ncpu > 0 && spec.vcpus > ncpu) throw badRequest(`vcpus ${spec.vcpus} exceeds the docker host's ${ncpu} CPUs`);
  }

  private info(signal?: AbortSignal): Promise<{ memTotal: number; ncpu: number }> {
    this.engineInfo ??= call('engine info', (s) => engineInfo(this.docker, s), signal).then(
      (i) => ({ memTotal: i.MemTotal ?? 0, ncpu: i.NCPU ?? 0 }),
      (err: unknown) => {
        this.engineInfo = undefined; // retry on the next spawn
        throw err;
      },
    );
    return this.engineInfo;
  }
}
