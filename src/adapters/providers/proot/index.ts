import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { badRequest, notFound, providerError } from '../../../core/errors.js';
import type {
  WorkspaceSpec,
  PreviewUpstream,
  ConsoleQuery,
  ExecEvent,
  ExecSpec,
  FileInfo,
  Provider,
  ProviderHealth,
  RuntimeInfo,
  RuntimeStatus,
  SpawnResult,
  SpawnSpec,
} from '../../../core/ports/index.js';
import { checkEnv } from '../shared/exec-process.js';
import { copyTree, HostCatalog } from '../shared/host-catalog.js';
import type { HostMount } from '../shared/host-fs/mounted.js';
import { HostRuntimes, isRuntimeId } from '../shared/host-runtimes.js';
import { hostWorkspace } from '../shared/host-workspace.js';
import {
  findOnPath,
  guestScript,
  launcherEnv,
  probeIsolation,
  refuseNetwork,
  unisolatedWarning,
  wrapperArgv,
} from '../shared/isolation.js';
import { CTL_GUEST, GUEST_EXEC_LAUNCHER, type GuestLaunch, hostPidIn } from '../shared/keeper.js';
import { sweepProotLoaders } from './loaders.js';
import { buildShellCommand } from '../../../shared/shell.js';

const run = promisify(execFile);

export interface ProotProviderOptions {
  /** proot executable; default `proot` from PATH. */
  binary?: string;
  /** Root filesystem directory (see scripts/make-rootfs.sh); each sandbox gets a copy. */
  rootfs: string;
  /** Where sandbox copies live; default `<os tmpdir>/sbx-proot`. */
  workDir?: string;
  /** Labels runtimes for reconciliation after a restart (RuntimeInfo.installation_id). */
  installationId?: string;
  /** Snapshots and volumes (DESIGN.md §10); default `<workDir>-data`. */
  dataDir?: string;
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health', 'snapshots', 'volumes', 'fork'] as const;
const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Loaders younger than this may belong to a tracer that is still starting. */
const LOADER_SWEEP_AGE_MS = 30_000;
const HEALTH_TIMEOUT_MS = 5_000;

/** What one proot provider works with: the tracer, the rootfs, the runtimes' directories and the catalog. */
interface Proot {
  binary: string;
  /** The tracer by path: the namespace launcher runs it by path, and the guest PATH must not pick it. */
  prootPath: string;
  rootfs: string;
  rt: HostRuntimes;
  catalog: HostCatalog;
}

/**
 * argv that runs `command` in the guest at `dir` under the wrapper (isolation.ts). The guest env
 * travels in the process environment, never in argv; the names that would act on the host-side
 * tracer (LD_*, PROOT_*, …) travel renamed and the wrapper in the guest restores them.
 */
function prootArgv(
  prootPath: string,
  prefix: string[],
  dir: string,
  workdir: string,
  guest: string[],
  mounts: readonly HostMount[] = [],
): string[] {
  // Volumes are bound at their guest paths (proot makes a missing mount point); the tracer
  // resolves guest paths inside the guest root, so a link in the tree cannot move one outside it.
  const binds = mounts.flatMap((m) => ['-b', `${m.host}:${m.guest}`]);
  return [...prefix, prootPath, '-v', '-1', '-r', dir, '-w', workdir, '-b', '/proc', '-b', '/dev', '-b', '/sys', ...binds, ...guest];
}

/** Health: a trial run in the rootfs under the isolation this host allows. */
async function prootHealth(p: Proot): Promise<ProviderHealth> {
  const { binary, rootfs, rt } = p;
  const started = performance.now();
  const done = (error?: string): ProviderHealth => {
    const latency_ms = Math.round(performance.now() - started);
    return error ? { healthy: false, latency_ms, error } : { healthy: true, latency_ms };
  };
  if (!existsSync(join(rootfs, 'bin', 'sh'))) return done('rootfs has no /bin/sh');
  const iso = await probeIsolation();
  try {
    // A trial run proves more than `--version`: the binary starts, ptrace works, the rootfs
    // boots, the namespace (if any) can be made.
    const argv = prootArgv(p.prootPath, iso.prefix, rootfs, '/', wrapperArgv('shell', 'exit 0', []));
    await run(argv[0]!, argv.slice(1), { timeout: HEALTH_TIMEOUT_MS, env: launcherEnv({ PATH: GUEST_PATH }) });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return done(code === 'ENOENT' ? `proot binary ${binary} not found` : 'proot could not run a command in the rootfs');
  }
  const health = done();
  health.runtime_count = (await rt.list()).length;
  const warning = unisolatedWarning(iso);
  if (warning) health.warning = warning;
  return health;
}

/** A spawn: a copy of the rootfs, a snapshot's tree or a fork's, with the volumes it binds. */
async function prootSpawn(p: Proot, spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
  const { rootfs, rt, catalog } = p;
  if (!isRuntimeId(spec.sandbox_id)) throw badRequest(`sandbox id ${JSON.stringify(spec.sandbox_id)} cannot name a directory`);
  refuseNetwork('proot', spec);
  // A fork's copy (DESIGN.md §16), a snapshot's tree (DESIGN.md §10) or the configured rootfs.
  const source =
    spec.fork !== undefined
      ? await catalog.forkSource(spec.fork)
      : spec.snapshot !== undefined
        ? await catalog.snapshotSource(spec.snapshot)
        : rootfs;
  if (!existsSync(join(source, 'bin', 'sh')) && spec.snapshot === undefined && spec.fork === undefined)
    throw providerError('proot rootfs is missing or has no /bin/sh');
  const mounts: HostMount[] = [];
  for (const v of spec.volumes ?? []) mounts.push({ host: await catalog.volumeSource(v.name), guest: v.mount_path });
  // Claims the id, labelled before the directory exists: a crash mid-copy leaves a runtime
  // that reconciliation recognises as this installation's.
  const dir = await rt.create(spec.sandbox_id, spec.sandbox_id, mounts);
  try {
    // Links copied as links; the server's own environment (secrets) never reaches a child process.
    await copyTree(source, dir, signal);
    await mkdir(join(dir, 'workspace'), { recursive: true });
    await mkdir(join(dir, 'tmp'), { recursive: true });
    await chmod(join(dir, 'tmp'), 0o1777);
  } catch {
    await rt.destroy(spec.sandbox_id);
    throw providerError(
      spec.fork !== undefined
        ? `could not copy fork image ${spec.fork} for the sandbox`
        : spec.snapshot !== undefined
          ? `could not copy snapshot ${spec.snapshot} for the sandbox`
          : 'could not copy the proot rootfs for the sandbox',
    );
  }
  return { runtime_id: spec.sandbox_id, network: 'host' };
}

/**
 * An exec in the sandbox's PID namespace (`ns` '': the sandbox's own; a pool workspace's name:
 * its own). The namespace's init is one long-lived proot, so nothing in the sandbox can kill the
 * tracer and leave a tracee running untraced; the keeper under it starts every exec, so what an
 * exec leaves running stays under the same tracer and path translation, never detached onto
 * host paths. The exec ends with its command (the wrapper reports the status), whatever it left.
 */
function prootExec(p: Proot, runtimeId: string, ns: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
  const { rt } = p;
  return rt.exec(
    runtimeId,
    async (fs, dir) => {
      if (spec.mode === 'argv' && spec.command.length === 0) throw badRequest('command is empty');
      const workdir = spec.workdir ?? '/workspace';
      await fs.hostDir(workdir);
      checkEnv(spec.env);
      const env = { PATH: GUEST_PATH, HOME: '/root', ...spec.env };
      const iso = await probeIsolation();
      const script = spec.mode === 'shell' ? buildShellCommand(spec.command, spec.args) : undefined;
      const mounts = await rt.mounts(runtimeId);
      if (iso.isolated) {
        // Started by the sandbox's keeper, under its tracer (keeper.ts); the guest env travels
        // in the script, never in argv nor in a host process's environment.
        const launch: GuestLaunch = {
          argv: async (ctl, guest) => prootArgv(p.prootPath, [], dir, '/', guest, [...mounts, { host: ctl, guest: CTL_GUEST }]),
          env: launcherEnv({ PATH: GUEST_PATH }),
          cwd: dir,
        };
        const entry = await rt.keepers.enter(iso, runtimeId, ns, null, launch);
        const tag = randomBytes(8).toString('hex');
        const wrapped = wrapperArgv(spec.mode, spec.command, spec.args, script, { status: true });
        return {
          file: entry.argv[0]!,
          args: [...entry.argv.slice(1), '/bin/sh', '-c', GUEST_EXEC_LAUNCHER, 'sbx-exec', tag],
          cwd: dir,
          env: { PATH: '/usr/bin:/bin' },
          stdin: spec.stdin,
          controls: spec.controls,
          launcher: true,
          fds: entry.fds,
          guest: {
            script: guestScript(workdir, env, wrapped),
            hostPid: (n: number) => hostPidIn(entry.pidNs, n),
            alive: () => rt.keepers.guestAlive(runtimeId, ns),
            lost: () => rt.keepers.stop(runtimeId, ns),
          },
          onEnd: () => void rm(join(entry.ctl!, tag), { recursive: true, force: true }).catch(() => undefined),
        };
      }
      // No namespace on this host: a tracer per exec, which spares itself from signals (the
      // wrapper reports the command's 128 + signo; proot alone exits 255 for a guest killed by one).
      const argv = prootArgv(p.prootPath, [], dir, workdir, wrapperArgv(spec.mode, spec.command, spec.args, script), mounts);
      // No terminal here (no pty library): a `tty` request runs with pipes.
      return {
        file: argv[0]!,
        args: argv.slice(1),
        // The host side starts in the sandbox copy: gone (destroyed meanwhile) = no start.
        cwd: dir,
        env: launcherEnv(env),
        stdin: spec.stdin,
        controls: spec.controls,
        launcher: true,
        signalSpares: 'leader' as const,
        // Nor does a kill reach it: a tracer killed first would leave its tracees running untraced.
        killSpares: 'leader' as const,
      };
    },
    signal,
    ns,
  );
}
/**
 * Sandboxes as proot guests: each runtime is a copy of the rootfs directory, commands run under
 * `proot -r <copy>`, files go straight to the copy. Each sandbox has its own PID namespace where
 * the host allows one (keeper.ts), which every exec enters, so it neither sees nor signals host
 * processes or other sandboxes, and what it starts in the background lives on until it ends or the
 * sandbox is destroyed; proot confines paths, not the network: it is a convenience without Docker,
 * not a security boundary.
 */
export function createProotProvider(opts: ProotProviderOptions): Provider {
  const binary = opts.binary || 'proot';
  const workDir = opts.workDir ?? join(tmpdir(), 'sbx-proot');
  const p: Proot = {
    binary,
    prootPath: binary.includes('/') ? binary : (findOnPath(binary) ?? binary),
    rootfs: opts.rootfs,
    rt: new HostRuntimes(workDir, opts.installationId ?? null),
    catalog: new HostCatalog(opts.dataDir ?? `${workDir}-data`, opts.installationId ?? null),
  };
  const { rt, catalog } = p;
  const execIn = (runtimeId: string, ns: string, spec: ExecSpec, signal: AbortSignal) => prootExec(p, runtimeId, ns, spec, signal);

  const provider: Provider = {
    name: 'proot',
    capabilities: CAPABILITIES,

    // No host paths here: provider details are shown to API callers.
    config: () => ({ runtime: 'proot', network_mode: 'host' }),

    health: () => prootHealth(p),

    spawn: (spec: SpawnSpec, signal?: AbortSignal) => prootSpawn(p, spec, signal),

    ...catalog.providerMethods(rt),

    async destroy(runtimeId: string): Promise<void> {
      await rt.destroy(runtimeId);
      // A tracer killed with the namespace leaves its loader in /tmp; old unmapped ones go.
      await sweepProotLoaders(LOADER_SWEEP_AGE_MS).catch(() => undefined);
    },
    status: (runtimeId: string): Promise<RuntimeStatus> => rt.status(runtimeId),
    // The cgroup freezer on the sandbox's processes (DESIGN.md §16); 501 where none is writable.
    pause: (runtimeId: string, signal?: AbortSignal) => rt.pause(runtimeId, signal),
    resume: (runtimeId: string) => rt.resume(runtimeId),
    // Stopping: nothing stays frozen, so the keepers die with the server (DESIGN.md §16).
    close: () => rt.thawAll(),
    listRuntimes: (): Promise<RuntimeInfo[]> => rt.list(),
    // The runtime shares this host's network: its ports are this host's loopback ports.
    async previewUpstream(runtimeId: string, port: number): Promise<PreviewUpstream> {
      if ((await rt.status(runtimeId)) === 'missing') throw notFound('the sandbox runtime is gone');
      return { host: '127.0.0.1', port };
    },

    exec: (runtimeId: string, spec: ExecSpec, signal: AbortSignal) => execIn(runtimeId, '', spec, signal),

    writeFile: (id: string, path: string, content: Uint8Array, mode: number | undefined) => rt.fs(id).writeFile(path, content, mode),
    writeFileStream: (id: string, path: string, body: AsyncIterable<Uint8Array>, mode: () => number | undefined) =>
      rt.fs(id).writeFileStream(path, body, mode),
    readFile: (id: string, path: string, _signal?: AbortSignal, maxBytes?: number) => rt.fs(id).readFile(path, maxBytes),
    deleteFile: (id: string, path: string, recursive: boolean) => rt.fs(id).deleteFile(path, recursive),
    listFiles: (id: string, path: string): Promise<FileInfo[]> => rt.fs(id).listFiles(path),
    moveFile: (id: string, from: string, to: string) => rt.fs(id).moveFile(from, to),
    chmod: (id: string, path: string, mode: number) => rt.fs(id).chmod(path, mode),
    stat: (id: string, path: string) => rt.fs(id).stat(path),
    glob: (id: string, pattern: string) => rt.fs(id).glob(pattern),
    logs: (id: string, query: ConsoleQuery) => rt.logs(id, query),
    watch: (id: string, path: string, opts: { recursive: boolean }, signal: AbortSignal) => rt.watch(id, path, opts.recursive, signal),
    workspace: (id: string, ws: WorkspaceSpec) => hostWorkspace(rt, id, ws, execIn),
  };

  return provider;
}
