import { chmod, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
import { HostRuntimes, isRuntimeId } from '../shared/host-runtimes.js';
import { hostWorkspace } from '../shared/host-workspace.js';
import { launcherEnv, probeIsolation, refuseNetwork, unisolatedWarning, wrapperArgv } from '../shared/isolation.js';
import { buildShellCommand } from '../../../shared/shell.js';

export interface MockProviderOptions {
  /** Where sandbox directories live; default `<os tmpdir>/sbx-mock`. */
  rootDir?: string;
  name?: string;
  /** Labels runtimes for reconciliation after a restart (RuntimeInfo.installation_id). */
  installationId?: string;
  /** Snapshots and volumes (DESIGN.md §10); default `<rootDir>-data`. */
  dataDir?: string;
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health', 'snapshots', 'volumes', 'fork'] as const;

/**
 * A provider without file or network isolation, for development and tests: each sandbox is a host
 * directory with `/workspace` and `/tmp`, and commands run on the host inside it. Each sandbox has
 * its own PID namespace where the host allows one (keeper.ts), which every exec enters: it cannot
 * see or signal the server, other sandboxes or their environments, and what it starts in the
 * background lives on until it ends or the sandbox is destroyed.
 */
export function createMockProvider(opts: MockProviderOptions = {}): Provider {
  const rootDir = opts.rootDir ?? join(tmpdir(), 'sbx-mock');
  const rt = new HostRuntimes(rootDir, opts.installationId ?? null);
  const catalog = new HostCatalog(opts.dataDir ?? `${rootDir}-data`, opts.installationId ?? null);

  const provider: Provider = {
    name: opts.name ?? 'mock',
    capabilities: CAPABILITIES,

    // No host paths here: provider details are shown to API callers.
    config: () => ({ runtime: 'host', network_mode: 'host' }),

    async health(): Promise<ProviderHealth> {
      const started = performance.now();
      try {
        await mkdir(rootDir, { recursive: true });
      } catch {
        return { healthy: false, latency_ms: Math.round(performance.now() - started), error: 'sandbox root directory is not writable' };
      }
      const warning = unisolatedWarning(await probeIsolation());
      const runtime_count = (await rt.list()).length;
      return { healthy: true, latency_ms: Math.round(performance.now() - started), runtime_count, ...(warning ? { warning } : {}) };
    },

    async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
      if (!isRuntimeId(spec.sandbox_id)) throw badRequest(`sandbox id ${JSON.stringify(spec.sandbox_id)} cannot name a directory`);
      refuseNetwork('mock', spec);
      // A fork's copy (DESIGN.md §16) or a snapshot's tree (DESIGN.md §10).
      const source =
        spec.fork !== undefined
          ? await catalog.forkSource(spec.fork)
          : spec.snapshot !== undefined
            ? await catalog.snapshotSource(spec.snapshot)
            : null;
      const mounts = [];
      for (const v of spec.volumes ?? []) mounts.push({ host: await catalog.volumeSource(v.name), guest: v.mount_path });
      // Labelled before it exists (reconciliation after a crash recognises it as ours).
      const dir = await rt.create(spec.sandbox_id, spec.sandbox_id, mounts);
      try {
        // A snapshot's tree as it was (links kept as links), else an empty sandbox.
        if (source) await copyTree(source, dir, signal);
        await mkdir(join(dir, 'workspace'), { recursive: true });
        await mkdir(join(dir, 'tmp'), { recursive: true });
        await chmod(join(dir, 'tmp'), 0o1777);
      } catch {
        await rt.destroy(spec.sandbox_id);
        throw providerError(
          spec.fork !== undefined
            ? `could not copy fork image ${spec.fork} for the sandbox`
            : source
              ? `could not copy snapshot ${spec.snapshot} for the sandbox`
              : 'could not prepare the sandbox directory',
        );
      }
      return { runtime_id: spec.sandbox_id, network: 'host' };
    },

    ...catalog.providerMethods(rt),

    destroy: (runtimeId: string) => rt.destroy(runtimeId),
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

  /** An exec in the sandbox's PID namespace (`ns` '': the sandbox's own; a pool workspace's name: its own). */
  function execIn(runtimeId: string, ns: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
    return rt.exec(
      runtimeId,
      async (fs, dir) => {
        if (spec.mode === 'argv' && spec.command.length === 0) throw badRequest('command is empty');
        const cwd = await fs.hostDir(spec.workdir ?? '/workspace');
        checkEnv(spec.env);
        const env = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: join(dir, 'workspace'), ...spec.env };
        const iso = await probeIsolation();
        // The wrapper resolves argv commands (127/126), survives the signals sent to the command
        // and reports its status; it runs in the sandbox's namespace, entered through its keeper.
        const script = spec.mode === 'shell' ? buildShellCommand(spec.command, spec.args) : undefined;
        const entry = iso.isolated ? await rt.keepers.enter(iso, runtimeId, ns, cwd) : null;
        const argv = [...(entry?.argv ?? []), ...wrapperArgv(spec.mode, spec.command, spec.args, script)];
        // No terminal here (no pty library): a `tty` request runs with pipes.
        return {
          file: argv[0]!,
          args: argv.slice(1),
          cwd,
          env: launcherEnv(env),
          stdin: spec.stdin,
          controls: spec.controls,
          launcher: true,
          ...(entry ? { fds: entry.fds, signalSpares: 'init' as const } : {}),
        };
      },
      signal,
      ns,
    );
  }
  return provider;
}
