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
import { readFile, rm, mkdir, writeFile, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { SbxError, notFound } from '../../../core/errors.js';
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
} from '../../../core/ports.js';
import { ConsoleRing } from '../shared/console-ring.js';
import { AgentClient } from './agent-client.js';
import { AGENT_VSOCK_PORT, connectVsock, type VsockConnect } from './agent-protocol.js';
import { DEFAULT_API_TIMEOUT_MS, FirecrackerApi } from './api-client.js';
import { type LaunchedVmm, MAX_SOCKET_PATH, missingOnHost, type SpawnProcess, spawnFirecracker } from './launcher.js';
import {
  buildSnapshot,
  copyDisk,
  deleteSnapshotFiles,
  readSnapshotMeta,
  SNAPSHOT_IMAGE_PREFIX,
  snapshotFiles,
  snapshotNameOf,
} from './snapshots.js';

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
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const DEFAULT_BOOT_ARGS = 'console=ttyS0 reboot=k panic=1 pci=off';
/** Vsock CIDs are per VM (each VM has its own UDS), so every guest can be 3, the first free one. */
const GUEST_CID = 3;

interface Live {
  vmm: LaunchedVmm;
  api: FirecrackerApi;
  console: ConsoleRing;
  sandboxId: string;
}

interface Meta {
  sandbox_id: string;
  installation_id: string | null;
  vcpus: number;
  memory_mib: number;
  snapshot: string | null;
}

export function createFirecrackerProvider(opts: FirecrackerProviderOptions): Provider & {
  snapshot(runtimeId: string, name: string, signal?: AbortSignal): Promise<{ image: string; kernel: string; size_bytes: number }>;
  deleteSnapshot(name: string, image: string, signal?: AbortSignal): Promise<void>;
} {
  const t = {
    apiMs: opts.timeouts?.apiMs ?? DEFAULT_API_TIMEOUT_MS,
    launchMs: opts.timeouts?.launchMs ?? 5_000,
    agentMs: opts.timeouts?.agentMs ?? 10_000,
    agentReadyMs: opts.timeouts?.agentReadyMs ?? 30_000,
    shutdownMs: opts.timeouts?.shutdownMs ?? 3_000,
  };
  const launch = opts.spawnProcess ?? spawnFirecracker;
  const vsock = opts.vsockConnect ?? connectVsock;
  const live = new Map<string, Live>();
  let execCount = 0;
  const kernelName = basename(opts.kernelPath);

  const dirOf = (id: string) => {
    if (!ID_RE.test(id)) throw notFound(`runtime ${JSON.stringify(id)} not found`);
    return join(opts.dataDir, id);
  };
  const agent = (id: string) => {
    const udsPath = join(dirOf(id), 'vsock.sock');
    return new AgentClient({
      connect: (signal) => vsock(udsPath, AGENT_VSOCK_PORT, { timeoutMs: t.agentMs, signal }),
      timeoutMs: t.agentMs,
    });
  };
  const running = (id: string): Live => {
    const l = live.get(id);
    if (!l || !l.vmm.alive()) throw notFound(`runtime ${JSON.stringify(id)} is not running`);
    return l;
  };

  async function readMeta(id: string): Promise<Meta | null> {
    try {
      return JSON.parse(await readFile(join(dirOf(id), 'meta.json'), 'utf8')) as Meta;
    } catch {
      return null;
    }
  }

  /** Waits until the guest agent answers a ping: the guest has booted (or resumed) that far. */
  async function waitForAgent(id: string, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + t.agentReadyMs;
    const client = agent(id);
    for (;;) {
      try {
        await client.ping(signal);
        return;
      } catch (err) {
        if (signal?.aborted) throw new SbxError('timeout', 'the spawn was cancelled while the guest booted');
        if (!running(id).vmm.alive()) throw new SbxError('provider_error', 'the VMM exited while the guest booted');
        if (Date.now() >= deadline)
          throw new SbxError(
            'timeout',
            `the guest agent did not answer within ${t.agentReadyMs} ms of the start (${(err as Error).message})`,
          );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function stopVmm(id: string): Promise<void> {
    const l = live.get(id);
    if (!l) return;
    live.delete(id);
    if (l.vmm.alive()) {
      // A clean guest shutdown first (x86: the guest's keyboard controller), bounded; then kill.
      await l.api.action('SendCtrlAltDel', { timeoutMs: Math.min(t.apiMs, 1_000) }).catch(() => undefined);
      await Promise.race([l.vmm.exited, new Promise((r) => setTimeout(r, t.shutdownMs).unref())]);
      l.vmm.kill('SIGKILL');
      await Promise.race([l.vmm.exited, new Promise((r) => setTimeout(r, 2_000).unref())]);
    }
  }

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

    async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
      if (!ID_RE.test(spec.sandbox_id))
        throw new SbxError('bad_request', `sandbox id ${JSON.stringify(spec.sandbox_id)} cannot name a directory`);
      if (spec.network === 'bridge' && !opts.network)
        throw new SbxError('not_implemented', 'firecracker has no network configured on this node: only network "none" is available');
      const withNet = opts.network && spec.network !== 'none' ? opts.network : undefined;
      const vcpus = spec.vcpus || opts.defaultVcpus || 1;
      const memory = spec.memory_mb || opts.defaultMemoryMib || 256;
      if (!Number.isInteger(vcpus) || vcpus < 1 || vcpus > 32) throw new SbxError('bad_request', 'firecracker runs 1 to 32 vCPUs');
      if (!Number.isInteger(memory) || memory < 1) throw new SbxError('bad_request', 'memory_mb must be a positive whole number');
      const snapName = snapshotNameOf(spec.image);
      const snap = snapName === null ? null : snapshotFiles(opts.dataDir, snapName);
      if (snap && !(await readSnapshotMeta(snap))) throw notFound(`snapshot ${snapName} not found`);

      const id = spec.sandbox_id;
      const dir = join(opts.dataDir, id);
      const apiSocket = join(dir, 'api.sock');
      if (Buffer.byteLength(join(dir, 'vsock.sock')) > MAX_SOCKET_PATH || Buffer.byteLength(apiSocket) > MAX_SOCKET_PATH) {
        throw new SbxError('provider_error', 'providers.firecracker.data_dir is too long for unix socket paths');
      }
      await mkdir(opts.dataDir, { recursive: true });
      try {
        await mkdir(dir);
      } catch {
        throw new SbxError('conflict', `a runtime ${id} already exists`);
      }
      try {
        const meta: Meta = { sandbox_id: id, installation_id: opts.installationId ?? null, vcpus, memory_mib: memory, snapshot: snapName };
        await writeFile(join(dir, 'meta.json'), JSON.stringify(meta));
        await copyDisk(snap ? snap.rootfs : opts.rootfsPath, join(dir, 'rootfs.ext4'));
        const vmm = await launch({ binary: opts.binary, apiSocket, cwd: dir, timeoutMs: t.launchMs, signal });
        const api = new FirecrackerApi(apiSocket, t.apiMs);
        const ring = new ConsoleRing();
        vmm.onOutput?.((chunk, source) => ring.append(chunk, source));
        live.set(id, { vmm, api, console: ring, sandboxId: id });
        const call = { signal };
        const nic = withNet
          ? { iface_id: 'eth0', host_dev_name: withNet.tapName(id), ...(withNet.guestMac ? { guest_mac: withNet.guestMac(id) } : {}) }
          : undefined;
        if (snap) {
          await api.loadSnapshot(
            {
              snapshot_path: snap.vmstate,
              mem_backend: { backend_type: 'File', backend_path: snap.memory },
              resume_vm: true,
              vsock_override: { uds_path: 'vsock.sock' },
              ...(nic ? { network_overrides: [{ iface_id: nic.iface_id, host_dev_name: nic.host_dev_name }] } : {}),
            },
            call,
          );
        } else {
          await api.putMachineConfig({ vcpu_count: vcpus, mem_size_mib: memory }, call);
          await api.putBootSource({ kernel_image_path: opts.kernelPath, boot_args: opts.bootArgs ?? DEFAULT_BOOT_ARGS }, call);
          await api.putDrive({ drive_id: 'rootfs', path_on_host: 'rootfs.ext4', is_root_device: true, is_read_only: false }, call);
          if (nic) await api.putNetworkInterface(nic, call);
          await api.putVsock({ guest_cid: GUEST_CID, uds_path: 'vsock.sock' }, call);
          await api.action('InstanceStart', call);
        }
        await waitForAgent(id, signal);
        return { runtime_id: id, network: nic ? 'tap' : 'none' };
      } catch (err) {
        await stopVmm(id).catch(() => undefined);
        await rm(dir, { recursive: true, force: true }).catch(() => undefined);
        throw err;
      }
    },

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
      const tag = `exec${++execCount}`;
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
