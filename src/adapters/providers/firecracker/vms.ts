/**
 * The firecracker provider's VMs on this node (index.ts is the Provider over them): their
 * directories, the live VMMs, the guest agent of each, booting one (a cold boot or a snapshot
 * restore) and stopping one.
 */
import { readFile, rm, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SbxError, notFound } from '../../../core/errors.js';
import type { SpawnResult, SpawnSpec } from '../../../core/ports/index.js';
import { ConsoleRing } from '../shared/console-ring.js';
import { AgentClient } from './agent-client.js';
import { AGENT_VSOCK_PORT, connectVsock } from './agent-protocol.js';
import { DEFAULT_API_TIMEOUT_MS, FirecrackerApi } from './api-client.js';
import type { FirecrackerProviderOptions } from './index.js';
import { type LaunchedVmm, MAX_SOCKET_PATH, spawnFirecracker } from './launcher.js';
import { copyDisk, readSnapshotMeta, snapshotFiles, snapshotNameOf } from './snapshots.js';

export const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const DEFAULT_BOOT_ARGS = 'console=ttyS0 reboot=k panic=1 pci=off';
/** Vsock CIDs are per VM (each VM has its own UDS), so every guest can be 3, the first free one. */
const GUEST_CID = 3;

export interface Live {
  vmm: LaunchedVmm;
  api: FirecrackerApi;
  console: ConsoleRing;
  sandboxId: string;
}

export interface Meta {
  sandbox_id: string;
  installation_id: string | null;
  vcpus: number;
  memory_mib: number;
  snapshot: string | null;
}

export type Vms = ReturnType<typeof makeVms>;

export function makeVms(opts: FirecrackerProviderOptions) {
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

  /** Boots a sandbox's VM: a cold boot from the root drive, or a restore of a snapshot named as its image. */
  async function spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
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
  }

  return { t, live, dirOf, agent, running, readMeta, waitForAgent, stopVmm, spawn, nextExecTag: () => `exec${++execCount}` };
}
