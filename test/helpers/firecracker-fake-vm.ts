/**
 * A launcher for the firecracker provider's tests: instead of the Firecracker binary it starts the
 * validating API server (firecracker-api.ts) on the API socket and, when the "guest" starts or is
 * restored, the fake agent (firecracker-agent.ts) on the vsock socket the configuration names, or
 * another guest (the real agent chrooted into the drive, guest-agent.ts).
 * The guest's root drive must be a directory here: the fake agent serves it as the guest's `/`.
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { LaunchedVmm, SpawnProcess } from '../../src/adapters/providers/firecracker/index.js';
import { type FakeAgent, startFakeAgent } from './firecracker-agent.js';
import { type FakeFirecrackerApi, type FakeApiState, startFakeFirecrackerApi } from './firecracker-api.js';

export interface FakeVm {
  cwd: string;
  api: FakeFirecrackerApi;
  agent?: FakeAgent;
  vmm: LaunchedVmm;
}

interface SavedState {
  drive_path: string;
  uds_path: string;
  machine_config: Record<string, unknown>;
}

/** What serves a booted guest's vsock socket, given its root drive (a directory here). */
export type GuestStarter = (udsPath: string, rootDrive: string) => Promise<FakeAgent>;

export function fakeLauncher(startGuest: GuestStarter = startFakeAgent): { launch: SpawnProcess; vms: FakeVm[] } {
  const vms: FakeVm[] = [];
  const launch: SpawnProcess = async (req) => {
    let alive = true;
    let onExit!: () => void;
    const exited = new Promise<void>((r) => (onExit = r));
    const vm = { cwd: req.cwd } as FakeVm;
    const rootDrive = (cfg: FakeApiState) => [...cfg.drives.values()].find((d) => d.is_root_device === true)!;
    const boot = async (drivePath: string, udsPath: string) => {
      vm.agent = await startGuest(resolve(req.cwd, udsPath), resolve(req.cwd, drivePath));
    };
    const stop = () => {
      if (!alive) return;
      alive = false;
      void Promise.all([vm.agent?.close(), vm.api.close()]).then(onExit);
    };
    vm.api = await startFakeFirecrackerApi(req.apiSocket, {
      onStart: (cfg) => boot(String(rootDrive(cfg).path_on_host), String(cfg.vsock!.uds_path)),
      async onSnapshotCreate(body, cfg) {
        const saved: SavedState = {
          drive_path: String(rootDrive(cfg).path_on_host),
          uds_path: String(cfg.vsock!.uds_path),
          machine_config: cfg.machineConfig!,
        };
        await writeFile(body.snapshot_path, JSON.stringify(saved));
        await writeFile(body.mem_file_path, Buffer.alloc(4096));
      },
      async onSnapshotLoad(body) {
        const saved = JSON.parse(await readFile(String(body.snapshot_path), 'utf8')) as SavedState;
        const mem = body.mem_backend as { backend_path: string };
        await stat(mem.backend_path);
        const uds = (body.vsock_override as { uds_path?: string } | undefined)?.uds_path ?? saved.uds_path;
        if (body.resume_vm === true) await boot(saved.drive_path, uds);
      },
      // The guest powers off: the VMM exits.
      onCtrlAltDel: () => setTimeout(stop, 10),
    });
    vm.vmm = { pid: undefined, alive: () => alive, exited, kill: stop };
    vms.push(vm);
    return vm.vmm;
  };
  return { launch, vms };
}
