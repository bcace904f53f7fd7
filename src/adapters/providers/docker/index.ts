import Docker from 'dockerode';
import { SbxError, unavailable } from '../../../core/errors.js';
import type { ExecEvent, ExecSpec, Provider } from '../../../core/ports/index.js';
import { DockerConsole } from './console.js';
import { Containers } from './containers.js';
import { killMarkedViaEngine, streamExec } from './exec.js';
import { DockerFiles } from './files.js';
import { dockerWorkspace } from './workspace.js';
import { ImageCache } from './images.js';
import { DockerSnapshots } from './snapshots.js';
import { DockerVolumes } from './volumes.js';
import { type ContainerUser, type DockerProviderOptions, dockerodeOptions, parseUser, resolveOptions } from './options.js';
import { AgentUnavailable, DockerAgents, LABEL_AGENT } from './agent.js';
import { agentCanExec, agentExec } from './agent-exec.js';
import { agentOpen, agentStat, agentWrite } from './agent-files.js';
import { agentWatch } from './agent-watch.js';
import { LABEL_SANDBOX } from './containers.js';
import type { OpenedFile } from '../../../core/ports/index.js';
import { readAll } from '../../../core/sandboxes/file-bytes.js';

/** The uid (and gid) of an image's `User`: undefined for root, null when only a name is known. */
function imageUid(imageUser: string): ContainerUser | undefined | null {
  const u = imageUser.trim();
  if (u === '' || u === '0' || u === 'root' || u === '0:0' || u === 'root:root') return undefined;
  try {
    return parseUser(u) ?? null;
  } catch {
    return null;
  }
}

/** Kernel filesystems: reads there stay with the engine paths (sizes of 0, endless files). */
const KERNEL_FS = /^\/(proc|sys|dev)(\/|$)/;
import { DockerEgress } from './egress.js';
import type { CatalogMethods } from '../shared/provider-parts.js';

export type { DockerProviderOptions, PullEvent } from './options.js';
export { LABEL_INSTALLATION, LABEL_OWNER, LABEL_SANDBOX, containerName } from './containers.js';
export { DockerEgress, filteredNames, filteredNetworkName, type FilteredNetwork, type FilteredNames } from './egress.js';

export const DOCKER_CAPABILITIES = [
  'spawn',
  'exec',
  'exec_stream',
  'files',
  'console',
  'health',
  'runtime_inventory',
  'container',
  'tty',
  'detach',
  'snapshots',
  'volumes',
  'fork',
] as const;

/** What one docker provider is made of: the engine client and the parts over it. */
interface DockerParts {
  opts: ReturnType<typeof resolveOptions>;
  docker: Docker;
  images: ImageCache;
  containers: Containers;
  files: DockerFiles;
  console_: DockerConsole;
  snapshots: DockerSnapshots;
  forks: DockerSnapshots;
  volumes: DockerVolumes;
  agents: DockerAgents | undefined;
  egress: DockerEgress;
}

function dockerParts(options: DockerProviderOptions): DockerParts {
  const opts = resolveOptions(options);
  // No client-wide timeout: it would cut quiet streaming execs. Each call carries its own bound.
  const docker = new Docker(dockerodeOptions(opts.endpoint) as Docker.DockerOptions);
  const images = new ImageCache(docker, opts);
  const { user } = opts;
  const console_ = new DockerConsole(docker);
  const egress = new DockerEgress(docker, opts);
  egress.onConsole = (runtimeId, line) => {
    const cap = console_.capture(runtimeId);
    cap.onOutput('stderr', Buffer.from(`${line}\n`));
    cap.end();
  };
  return {
    opts,
    docker,
    images,
    containers: new Containers(docker, opts, images),
    files: new DockerFiles(docker, { viaExec: opts.readOnlyRootfs, owner: user ? { uid: user.uid, gid: user.gid ?? 0 } : undefined }),
    console_,
    snapshots: new DockerSnapshots(docker, opts.installationId),
    forks: new DockerSnapshots(docker, opts.installationId, 'fork'),
    volumes: new DockerVolumes(docker, opts.installationId),
    agents: opts.agent ? new DockerAgents(docker, opts.agent) : undefined,
    egress,
  };
}

/** An operation through the runtime's agent when it has one up; the engine path otherwise. */
async function viaAgent<V>(
  agents: DockerAgents | undefined,
  runtimeId: string,
  op: (conn: NonNullable<Awaited<ReturnType<DockerAgents['get']>>>) => Promise<V>,
  engine: () => Promise<V>,
): Promise<V> {
  const conn = agents ? await agents.get(runtimeId) : undefined;
  if (conn) {
    try {
      return await op(conn);
    } catch (err) {
      if (!(err instanceof AgentUnavailable)) throw err;
    }
  }
  return engine();
}

/** A spawn: snapshot or fork image checked, filtered network and volumes ready, the agent prepared and connected. */
function spawnOp(p: DockerParts): Provider['spawn'] {
  const { agents, egress, opts } = p;
  return async (spec, signal) => {
    if (spec.snapshot !== undefined) await p.snapshots.require(spec.snapshot, spec.image, signal);
    if (spec.fork !== undefined) await p.forks.require(spec.fork, spec.image, signal);
    // Filtered (DESIGN §10): the first one brings the network, firewall and gateway up; 501 with the reason when they cannot be.
    const filtered = spec.network === 'filtered' ? await egress.createOptions(spec.sandbox_id) : undefined;
    const mounts = spec.volumes?.length ? await p.volumes.mounts(spec.volumes, signal) : [];
    let part: ReturnType<DockerAgents['prepare']>;
    const agentFor = agents
      ? (imageUser: string) => {
          // The agent runs as the container's user, which must own its socket directory: a user
          // known only by name (in the image's passwd) gets no agent, the engine paths serve.
          const as = opts.user ?? imageUid(imageUser);
          if (as === null) return undefined;
          try {
            return (part = agents.prepare(spec.sandbox_id, as));
          } catch {
            return undefined; // a state directory this process cannot make: no agent, not a failed spawn
          }
        }
      : undefined;
    let result: Awaited<ReturnType<Containers['spawn']>>;
    try {
      result = await p.containers.spawn(spec, signal, mounts, agentFor, filtered).catch(async (err: unknown) => {
        if (part) await agents!.forget('', { sandboxId: spec.sandbox_id, token: part.labels[LABEL_AGENT] });
        throw err;
      });
    } finally {
      if (filtered) egress.forgetSources();
    }
    if (part) await agents!.started(result.runtime_id, spec.sandbox_id, part.labels[LABEL_AGENT]!);
    return result;
  };
}

/** Snapshots, fork images and volumes: images and volumes of this installation. */
function catalogOps(p: DockerParts): CatalogMethods {
  const { snapshots, forks, volumes } = p;
  /** A commit takes the container's root filesystem; with a read-only one every write lives in tmpfs, which it does not take. */
  const refuseReadOnly = (what: string) => {
    if (p.opts.readOnlyRootfs)
      throw new SbxError(
        'not_implemented',
        `provider docker cannot ${what} with providers.docker.read_only_rootfs: writes live in tmpfs mounts, ` +
          `which a commit does not capture`,
      );
  };
  return {
    snapshot: async (runtimeId, name, signal) => {
      refuseReadOnly('take snapshots');
      return snapshots.create(runtimeId, name, signal);
    },
    deleteSnapshot: (name, _image, signal) => snapshots.remove(name, signal),
    // DESIGN §16: a fork's copy is a commit like a snapshot's (paused while it copies), kept as a fork image.
    forkImage: async (runtimeId, name, signal) => {
      refuseReadOnly('fork sandboxes');
      return { image: (await forks.create(runtimeId, name, signal)).image };
    },
    deleteForkImage: (name, signal) => forks.remove(name, signal),
    createVolume: (name, signal) => volumes.create(name, signal),
    deleteVolume: (name, signal) => volumes.remove(name, signal),
    listCatalog: async (signal) => ({ snapshots: await snapshots.list(signal), volumes: await volumes.list(signal) }),
    listForkImages: (signal) => forks.list(signal),
    volumeSizes: (names, signal) => volumes.sizes(names, signal),
  };
}

/** An exec through the runtime's agent when it can take it, through the engine otherwise; output captured for the console. */
function execOp(p: DockerParts): Provider['exec'] {
  const { agents, docker } = p;
  return (runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> => ({
    [Symbol.asyncIterator]: async function* () {
      const cap = p.console_.capture(runtimeId);
      try {
        const conn = agents && !spec.tty && !signal.aborted ? await agents.forExec(runtimeId, spec.user) : undefined;
        if (conn && agentCanExec(conn, spec)) {
          try {
            yield* agentExec(conn, spec, signal, cap.onOutput, (marker) => killMarkedViaEngine(docker, runtimeId, marker, spec.user));
            return;
          } catch (err) {
            // Nothing ran yet (the agent refused or went away before the start): the engine runs it.
            if (!(err instanceof AgentUnavailable)) throw err;
          }
        }
        yield* streamExec(docker, runtimeId, spec, signal, { onOutput: cap.onOutput });
      } finally {
        cap.end();
      }
    },
  });
}

/** Files: through the agent where it serves as the engine would, through the engine's archives otherwise; watch only by the agent. */
function fileOps(
  p: DockerParts,
): Pick<Provider, 'writeFile' | 'readFile' | 'openFile' | 'deleteFile' | 'listFiles' | 'moveFile' | 'chmod' | 'stat' | 'glob' | 'watch'> {
  const { agents, files } = p;
  const { user } = p.opts;
  const openFile = (runtimeId: string, path: string, signal: AbortSignal | undefined, maxBytes: number | undefined): Promise<OpenedFile> =>
    KERNEL_FS.test(path)
      ? files.open(runtimeId, path, maxBytes, signal)
      : viaAgent(
          agents,
          runtimeId,
          (c) => agentOpen(c, path, maxBytes),
          () => files.open(runtimeId, path, maxBytes, signal),
        );
  return {
    writeFile: (runtimeId, path, content, mode, signal) =>
      // A user configured without a gid gets group 0 on what the API writes (the engine path's tar
      // header); the agent could only give its own group, so those writes stay with the engine.
      user && user.gid === undefined
        ? files.write(runtimeId, path, content, mode, signal)
        : viaAgent(
            agents,
            runtimeId,
            (c) => agentWrite(c, path, content, mode),
            () => files.write(runtimeId, path, content, mode, signal),
          ),
    readFile: async (runtimeId, path, signal, maxBytes) =>
      KERNEL_FS.test(path) || !agents
        ? files.read(runtimeId, path, maxBytes, signal)
        : readAll(await openFile(runtimeId, path, signal, maxBytes)),
    openFile: (runtimeId, path, signal, maxBytes) => openFile(runtimeId, path, signal, maxBytes),
    deleteFile: (runtimeId, path, recursive, signal) => files.remove(runtimeId, path, recursive, signal),
    listFiles: (runtimeId, path, signal) => files.list(runtimeId, path, signal),
    moveFile: (runtimeId, from, to, signal) => files.move(runtimeId, from, to, signal),
    chmod: (runtimeId, path, mode, signal) => files.chmod(runtimeId, path, mode, signal),
    stat: (runtimeId, path, signal) =>
      viaAgent(
        agents,
        runtimeId,
        (c) => agentStat(c, path),
        () => files.stat(runtimeId, path, signal),
      ),
    glob: (runtimeId, pattern, signal) => files.glob(runtimeId, pattern, signal),
    watch: async (runtimeId, path, opts, signal) => {
      // Only through the agent's inotify (DESIGN §16): never by polling the engine.
      const conn = agents ? await agents.get(runtimeId) : undefined;
      if (!conn) throw new SbxError('not_implemented', 'file watch on docker needs sbx-agent in the sandbox (providers.docker.agent)');
      return agentWatch(conn, path, opts.recursive, signal);
    },
  };
}

/**
 * The docker provider: one container per sandbox (dockerode over the engine socket), hardened by
 * default (all capabilities dropped, no-new-privileges, pids and memory limits without swap,
 * an init as PID 1), labelled with the installation id so reconciliation only touches its own.
 */
export function createDockerProvider(options: DockerProviderOptions): Provider {
  const p = dockerParts(options);
  const { opts, docker, containers, console_, agents, egress } = p;
  /** A container's teardown: its agent's leftovers, console and egress source go with it. */
  const destroy = async (runtimeId: string, signal: AbortSignal | undefined, graceful: boolean) => {
    const labels = agents && !agents.knows(runtimeId) ? await containers.labels(runtimeId, signal) : undefined;
    await containers.destroy(runtimeId, signal, graceful);
    console_.forget(runtimeId);
    await agents?.forget(runtimeId, { sandboxId: labels?.[LABEL_SANDBOX], token: labels?.[LABEL_AGENT] });
    egress.forgetSources();
    await egress.forgetBundle(runtimeId);
  };
  const provider: Provider = {
    name: 'docker',
    capabilities: DOCKER_CAPABILITIES,
    egress,
    config: () => ({
      endpoint: opts.endpoint.description,
      runtime: opts.runtime ?? 'runc',
      network_mode: opts.networkMode,
      pids_limit: opts.pidsLimit,
      read_only_rootfs: opts.readOnlyRootfs,
      agent: opts.agent ? 'on' : 'off',
      // DESIGN §10: whether network "filtered" is enforced here, and if not why (doctor shows it).
      filtered: egress.unavailable() ?? 'available',
    }),
    imagePresent: (image, signal) => p.images.present(image, signal),
    health: async (signal) => {
      const h = await containers.health(signal);
      return h.healthy ? h : { ...h, error: `${h.error ?? 'docker engine unreachable'} at ${opts.endpoint.description}` };
    },
    spawn: spawnOp(p),
    ...catalogOps(p),
    destroy: (runtimeId, signal) => destroy(runtimeId, signal, true),
    discard: (runtimeId, signal) => destroy(runtimeId, signal, false),
    status: (runtimeId, signal) => containers.status(runtimeId, signal),
    pause: (runtimeId, signal) => containers.pause(runtimeId, signal),
    resume: (runtimeId, signal) => containers.resume(runtimeId, signal),
    listRuntimes: (signal) => containers.listRuntimes(signal),
    previewUpstream: (runtimeId, port, signal) => containers.previewUpstream(runtimeId, port, signal),
    exec: execOp(p),
    ...fileOps(p),
    logs: (runtimeId, query, signal) => console_.logs(runtimeId, query, signal),
    workspace: (runtimeId, ws) => dockerWorkspace(docker, agents, runtimeId, ws, (id, spec, signal) => provider.exec(id, spec, signal)),
    close: async () => {
      // dockerode keeps no pooled connections or timers of its own; the agents' connections close.
      agents?.close();
    },
  };
  return provider;
}

/**
 * The docker provider when the engine's address itself is unusable (an unsupported DOCKER_HOST
 * scheme, an unreadable context): listed, unhealthy with `reason`, and every operation answers
 * 503 `unavailable` with it. Never a fallback to another engine.
 */
export function createUnusableDockerProvider(reason: string): Provider {
  const fail = async (): Promise<never> => {
    throw unavailable(`docker provider unavailable: ${reason}`);
  };
  return {
    name: 'docker',
    capabilities: DOCKER_CAPABILITIES,
    config: () => ({ endpoint: `unusable: ${reason}` }),
    health: async () => ({ healthy: false, latency_ms: 0, error: reason }),
    spawn: fail,
    destroy: fail,
    status: fail,
    exec: () => ({
      [Symbol.asyncIterator]: () => ({ next: fail }),
    }),
    writeFile: fail,
    readFile: fail,
    deleteFile: fail,
    listFiles: fail,
    moveFile: fail,
    chmod: fail,
    stat: fail,
    glob: fail,
    logs: fail,
  };
}
