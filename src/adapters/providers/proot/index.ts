import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { badRequest, conflict, providerError } from '../../../core/errors.js';
import type { ConsoleQuery, ExecEvent, ExecSpec, FileInfo, Provider, ProviderHealth, RuntimeInfo, RuntimeStatus, SpawnResult, SpawnSpec } from '../../../core/ports.js';
import { checkEnv } from '../shared/exec-process.js';
import { HostRuntimes, isRuntimeId } from '../shared/host-runtimes.js';
import { buildShellCommand } from '../shared/shell.js';

const run = promisify(execFile);

export interface ProotProviderOptions {
  /** proot executable; default `proot` from PATH. */
  binary?: string;
  /** Root filesystem directory (see scripts/make-rootfs.sh); each sandbox gets a copy. */
  rootfs: string;
  /** Where sandbox copies live; default `<os tmpdir>/sbx-proot`. */
  workDir?: string;
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health'] as const;
const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const GUEST_ENV_PROGRAM = '/usr/bin/env';
const HEALTH_TIMEOUT_MS = 5_000;
/** Runs "$@" and exits with its status; catching the signals (reset to default for "$@") keeps it alive to do so. */
const SIGNAL_STATUS_WRAPPER = 'trap : INT TERM HUP QUIT USR1 USR2; "$@"; s=$?; exit $s';

/**
 * Sandboxes as proot guests: each runtime is a copy of the rootfs directory, commands run under
 * `proot -r <copy>`, files go straight to the copy. proot confines paths, not processes or the
 * network: it is a convenience without Docker, not a security boundary.
 */
export function createProotProvider(opts: ProotProviderOptions): Provider {
  const binary = opts.binary || 'proot';
  const rootfs = opts.rootfs;
  const workDir = opts.workDir ?? join(tmpdir(), 'sbx-proot');
  const rt = new HostRuntimes(workDir);

  /** proot arguments that run `program` in the guest at `dir` with exactly `env`. */
  function prootArgs(dir: string, workdir: string, env: Record<string, string>, program: string[]): string[] {
    // The guest env travels as `env -i` arguments: variables set on proot itself (LD_PRELOAD,
    // PROOT_*) would act on the host-side tracer, not in the sandbox.
    const envArgs = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    return ['-r', dir, '-w', workdir, '-b', '/proc', '-b', '/dev', '-b', '/sys', GUEST_ENV_PROGRAM, '-i', ...envArgs, ...program];
  }

  return {
    name: 'proot',
    capabilities: CAPABILITIES,

    // No host paths here: provider details are shown to API callers.
    config: () => ({ runtime: 'proot', network_mode: 'host' }),

    async health(): Promise<ProviderHealth> {
      const started = performance.now();
      const done = (error?: string): ProviderHealth => {
        const latency_ms = Math.round(performance.now() - started);
        return error ? { healthy: false, latency_ms, error } : { healthy: true, latency_ms };
      };
      if (!existsSync(join(rootfs, 'bin', 'sh'))) return done('rootfs has no /bin/sh');
      if (!existsSync(join(rootfs, 'usr', 'bin', 'env'))) return done('rootfs has no /usr/bin/env');
      try {
        // A trial run proves more than `--version`: the binary starts, ptrace works, the rootfs boots.
        await run(binary, ['-r', rootfs, GUEST_ENV_PROGRAM, '-i', '/bin/sh', '-c', 'exit 0'], {
          timeout: HEALTH_TIMEOUT_MS,
          env: { PATH: process.env.PATH ?? GUEST_PATH },
        });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        return done(code === 'ENOENT' ? `proot binary ${binary} not found` : 'proot could not run a command in the rootfs');
      }
      const health = done();
      health.runtime_count = (await rt.list()).length;
      return health;
    },

    async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
      if (!isRuntimeId(spec.sandbox_id)) throw badRequest(`sandbox id ${JSON.stringify(spec.sandbox_id)} cannot name a directory`);
      if (!existsSync(join(rootfs, 'bin', 'sh'))) throw providerError('proot rootfs is missing or has no /bin/sh');
      const dir = join(workDir, spec.sandbox_id);
      await mkdir(workDir, { recursive: true });
      if (existsSync(dir)) throw conflict(`runtime ${spec.sandbox_id} already exists`);
      try {
        await run('cp', ['-a', rootfs, dir], { signal });
        await mkdir(join(dir, 'workspace'), { recursive: true });
        await mkdir(join(dir, 'tmp'), { recursive: true });
        await chmod(join(dir, 'tmp'), 0o1777);
      } catch {
        await rm(dir, { recursive: true, force: true });
        throw providerError('could not copy the proot rootfs for the sandbox');
      }
      return { runtime_id: spec.sandbox_id };
    },

    destroy: (runtimeId: string) => rt.destroy(runtimeId),
    status: (runtimeId: string): Promise<RuntimeStatus> => rt.status(runtimeId),
    listRuntimes: (): Promise<RuntimeInfo[]> => rt.list(),

    exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
      return rt.exec(
        runtimeId,
        async (fs, dir) => {
          const workdir = spec.workdir ?? '/workspace';
          await fs.hostDir(workdir);
          checkEnv(spec.env);
          const env = { PATH: GUEST_PATH, HOME: '/root', ...spec.env };
          let program: string[];
          if (spec.mode === 'shell') program = ['/bin/sh', '-c', buildShellCommand(spec.command, spec.args)];
          // `env` would take a command containing `=` for one more assignment.
          else if (spec.command.includes('=')) program = ['/bin/sh', '-c', 'exec "$0" "$@"', spec.command, ...spec.args];
          else program = [spec.command, ...spec.args];
          // proot exits 255 for a guest killed by a signal. With live controls, a guest shell that
          // outlives a signal (caught) reports the command's 128 + signo instead; signals spare
          // the tracer itself.
          if (spec.controls) program = ['/bin/sh', '-c', SIGNAL_STATUS_WRAPPER, 'sbx', ...program];
          // No terminal here (no pty library): a `tty` request runs with pipes.
          return {
            file: binary,
            args: prootArgs(dir, workdir, env, program),
            env: { PATH: process.env.PATH ?? GUEST_PATH },
            stdin: spec.stdin,
            controls: spec.controls,
            signalSparesLeader: true,
          };
        },
        signal,
      );
    },

    writeFile: (id: string, path: string, content: Uint8Array, mode: number | undefined) => rt.fs(id).writeFile(path, content, mode),
    readFile: (id: string, path: string, _signal?: AbortSignal, maxBytes?: number) => rt.fs(id).readFile(path, maxBytes),
    deleteFile: (id: string, path: string, recursive: boolean) => rt.fs(id).deleteFile(path, recursive),
    listFiles: (id: string, path: string): Promise<FileInfo[]> => rt.fs(id).listFiles(path),
    moveFile: (id: string, from: string, to: string) => rt.fs(id).moveFile(from, to),
    chmod: (id: string, path: string, mode: number) => rt.fs(id).chmod(path, mode),
    stat: (id: string, path: string) => rt.fs(id).stat(path),
    glob: (id: string, pattern: string) => rt.fs(id).glob(pattern),
    logs: (id: string, query: ConsoleQuery) => rt.logs(id, query),
  };
}
