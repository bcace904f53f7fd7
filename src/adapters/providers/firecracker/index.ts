/**
 * The firecracker provider (DESIGN §12): one Firecracker microVM per sandbox, configured over its
 * API socket (api-client.ts), with exec and files through a guest agent over vsock
 * (agent-client.ts). docs/providers/firecracker.md says what it needs and what was verified.
 *
 * Each sandbox has `<dataDir>/<id>/`: the API socket, its own copy of the root drive
 * (`rootfs.ext4`), the vsock socket and `meta.json`. The VMM runs in that directory and its config
 * names the drive and the vsock socket by relative paths, so a snapshot taken of one sandbox
 * restores into another sandbox's directory unchanged.
 */
import { rm, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { notFound } from '../../../core/errors.js';
import type {
  ConsoleQuery,
  ExecEvent,
  ExecSpec,
  Provider,
  ProviderHealth,
  RuntimeInfo,
  RuntimeStatus,
  SpawnResult,
  SpawnSpec,
} from '../../../core/ports/index.js';
import type { VsockConnect } from './agent-protocol.js';
import { missingOnHost, type SpawnProcess } from './launcher.js';
import { buildSnapshot, copyDisk, deleteSnapshotFiles, SNAPSHOT_IMAGE_PREFIX } from './snapshots.js';
import { ID_RE, makeVms } from './vms.js';

export { FirecrackerApi } from './api-client.js';
export type { SpawnProcess, LaunchedVmm, LaunchRequest } from './launcher.js';
export type { VsockConnect } from './agent-protocol.js';

export interface FirecrackerProviderOptions {
  name?: string;
  /** providers.firecracker.binary */
  binary: string;
  /** providers.firecracker.kernel_path: an uncompressed guest kernel (vmlinux). */
  kernelPath: string;
  /** providers.firecracker.rootfs_path: the root drive image every cold boot copies; holds the guest agent. */
  rootfsPath: string;
  /** providers.firecracker.data_dir: sandbox directories and snapshots. */
  dataDir: string;
  /** Used when a spawn asks for 0 vCPUs / 0 MiB; default 1 and 256. */
  defaultVcpus?: number;
  defaultMemoryMib?: number;
  bootArgs?: string;
  /** A TAP device per sandbox (created by the host's operator tooling); absent = no network interface. */
  network?: { tapName: (sandboxId: string) => string; guestMac?: (sandboxId: string) => string };
  /** Labels runtimes for reconciliation (RuntimeInfo.installation_id). */
  installationId?: string;
  /** Starts the VMM; default spawns `binary --api-sock <dataDir>/<id>/api.sock`. */
  spawnProcess?: SpawnProcess;
  /** Opens the guest agent's vsock port; default Firecracker's UDS handshake. */
  vsockConnect?: VsockConnect;
  /** Default /dev/kvm (tests point it elsewhere). */
  kvmPath?: string;
  timeouts?: { apiMs?: number; launchMs?: number; agentMs?: number; agentReadyMs?: number; shutdownMs?: number };
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health', 'snapshot'] as const;

export function createFirecrackerProvider(opts: FirecrackerProviderOptions): Provider & {
  snapshot(runtimeId: string, name: string, signal?: AbortSignal): Promise<{ image: string; kernel: string; size_bytes: number }>;
  deleteSnapshot(name: string, image: string, signal?: AbortSignal): Promise<void>;
} {
  const vms = makeVms(opts);
  const { t, live, dirOf, agent, running, readMeta, stopVmm } = vms;
  const kernelName = basename(opts.kernelPath);

  const provider = {
    name: opts.name ?? 'firecracker',
    capabilities: CAPABILITIES,
    // No host paths: provider details are shown to API callers.
    config: () => ({
      runtime: 'firecracker',
      network_mode: opts.network ? 'tap' : 'none',
      kernel: kernelName,
      rootfs: basename(opts.rootfsPath),
    }),

    async health(): Promise<ProviderHealth> {
      const started = performance.now();
      const missing = await missingOnHost({
        binary: opts.binary,
        kernelPath: opts.kernelPath,
        rootfsPath: opts.rootfsPath,
        kvmPath: opts.kvmPath,
      });
      const latency_ms = Math.round(performance.now() - started);
      if (missing.length) return { healthy: false, latency_ms, error: `cannot run guests here: ${missing.join('; ')}` };
      return { healthy: true, latency_ms, runtime_count: [...live.values()].filter((l) => l.vmm.alive()).length };
    },

    spawn: (spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> => vms.spawn(spec, signal),

    async destroy(runtimeId: string): Promise<void> {
      const dir = dirOf(runtimeId);
      await stopVmm(runtimeId);
      await rm(dir, { recursive: true, force: true });
    },

    async status(runtimeId: string): Promise<RuntimeStatus> {
      const l = live.get(runtimeId);
      if (l) return l.vmm.alive() ? 'running' : 'stopped';
      // A VMM started by an earlier process of this node is not ours to drive: stopped.
      return (await readMeta(runtimeId)) ? 'stopped' : 'missing';
    },

    async listRuntimes(): Promise<RuntimeInfo[]> {
      let names: string[];
      try {
        names = await readdir(opts.dataDir);
      } catch {
        return [];
      }
      const out: RuntimeInfo[] = [];
      for (const n of names.filter((x) => ID_RE.test(x)).sort()) {
        const meta = await readMeta(n);
        if (!meta) continue;
        const l = live.get(n);
        out.push({
          runtime_id: n,
          sandbox_id: meta.sandbox_id,
          installation_id: meta.installation_id,
          status: l?.vmm.alive() ? 'running' : 'stopped',
        });
      }
      return out;
    },

    /** Output also goes to the console ring, as with the other providers (the serial console has the guest's own). */
    async *exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
      const l = running(runtimeId);
      const tag = vms.nextExecTag();
      try {
        for await (const ev of agent(runtimeId).exec({ ...spec, workdir: spec.workdir ?? '/workspace' }, signal)) {
          if (ev.stream !== 'exit') l.console.append(ev.data, `${tag}:${ev.stream}`);
          yield ev;
        }
      } finally {
        l.console.flush(`${tag}:stdout`);
        l.console.flush(`${tag}:stderr`);
      }
    },
    writeFile: async (id: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal) => (
      running(id), agent(id).writeFile(path, content, mode, signal)
    ),
    readFile: async (id: string, path: string, signal?: AbortSignal, maxBytes?: number) => (
      running(id), agent(id).readFile(path, signal, maxBytes)
    ),
    openFile: async (id: string, path: string, signal?: AbortSignal, maxBytes?: number) => (
      running(id), agent(id).openFile(path, signal, maxBytes)
    ),
    deleteFile: async (id: string, path: string, recursive: boolean, signal?: AbortSignal) => (
      running(id), agent(id).deleteFile(path, recursive, signal)
    ),
    listFiles: async (id: string, path: string, signal?: AbortSignal) => (running(id), agent(id).listFiles(path, signal)),
    moveFile: async (id: string, from: string, to: string, signal?: AbortSignal) => (running(id), agent(id).moveFile(from, to, signal)),
    chmod: async (id: string, path: string, mode: number, signal?: AbortSignal) => (running(id), agent(id).chmod(path, mode, signal)),
    stat: async (id: string, path: string, signal?: AbortSignal) => (running(id), agent(id).stat(path, signal)),
    glob: async (id: string, pattern: string, signal?: AbortSignal) => (running(id), agent(id).glob(pattern, signal)),

    async logs(runtimeId: string, query: ConsoleQuery) {
      const l = live.get(runtimeId);
      if (!l) {
        if (await readMeta(runtimeId)) return { lines: [] };
        throw notFound(`runtime ${JSON.stringify(runtimeId)} not found`);
      }
      return l.console.read(query);
    },

    /** Full snapshot: pause, write vmstate and memory, copy the root drive, resume (always). */
    async snapshot(runtimeId: string, name: string, signal?: AbortSignal) {
      const l = running(runtimeId);
      const meta = await readMeta(runtimeId);
      const size_bytes = await buildSnapshot(
        opts.dataDir,
        name,
        { kernel: kernelName, vcpus: meta?.vcpus ?? 0, memory_mib: meta?.memory_mib ?? 0 },
        async (scratch) => {
          await l.api.setVmState('Paused', { signal });
          try {
            await l.api.createSnapshot(
              { snapshot_type: 'Full', snapshot_path: scratch.vmstate, mem_file_path: scratch.memory },
              { signal, timeoutMs: Math.max(t.apiMs, 60_000) },
            );
            await copyDisk(join(dirOf(runtimeId), 'rootfs.ext4'), scratch.rootfs);
          } finally {
            await l.api.setVmState('Resumed');
          }
        },
      );
      return { image: `${SNAPSHOT_IMAGE_PREFIX}${name}`, kernel: kernelName, size_bytes };
    },

    async deleteSnapshot(_name: string, image: string) {
      await deleteSnapshotFiles(opts.dataDir, image);
    },

    async close() {
      await Promise.all([...live.keys()].map((id) => stopVmm(id).catch(() => undefined)));
    },
  };
  return provider;
}
