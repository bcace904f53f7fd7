/**
 * Starting the VMM: the default launcher spawns the Firecracker binary with `--api-sock` in the
 * sandbox's directory and waits, with a deadline, until the API socket answers. Tests inject their
 * own launcher (a validating fake API server) through the same interface.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, open } from 'node:fs/promises';
import { connect } from 'node:net';
import { SbxError } from '../../../core/errors.js';

export interface LaunchRequest {
  binary: string;
  /** Absolute path of the API socket to create (`<dataDir>/<id>/api.sock`). */
  apiSocket: string;
  /** The sandbox's directory: the VMM's working directory, so relative paths in its config resolve there. */
  cwd: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** A running VMM process. */
export interface LaunchedVmm {
  pid?: number;
  alive(): boolean;
  /** Resolves when the process has ended (or at once if it has). */
  exited: Promise<void>;
  kill(signal: 'SIGTERM' | 'SIGKILL'): void;
  /** The guest's serial console (the VMM's stdout and stderr), as it arrives. */
  onOutput?(listener: (chunk: Buffer, source: 'stdout' | 'stderr') => void): void;
}

export type SpawnProcess = (req: LaunchRequest) => Promise<LaunchedVmm>;

/** The longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
export const MAX_SOCKET_PATH = 107;

/** Resolves once a connection to `path` succeeds; polls until the deadline. */
export async function waitForSocket(path: string, timeoutMs: number, isAlive: () => boolean, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ path });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (!isAlive()) throw new SbxError('provider_error', 'firecracker exited before its API socket was ready');
    if (signal?.aborted) throw new SbxError('timeout', 'starting firecracker was cancelled');
    if (Date.now() >= deadline) throw new SbxError('timeout', `firecracker's API socket was not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The real launcher: `<binary> --api-sock <apiSocket>` in `cwd`, its output kept for the console. */
export const spawnFirecracker: SpawnProcess = async (req) => {
  const child = spawn(req.binary, ['--api-sock', req.apiSocket], { cwd: req.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let running = true;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running = false;
      resolve();
    });
    child.once('error', () => {
      running = false;
      resolve();
    });
  });
  const vmm: LaunchedVmm = {
    pid: child.pid,
    alive: () => running,
    exited,
    kill: (sig) => {
      if (running) child.kill(sig);
    },
    onOutput(listener) {
      child.stdout.on('data', (c: Buffer) => listener(c, 'stdout'));
      child.stderr.on('data', (c: Buffer) => listener(c, 'stderr'));
    },
  };
  try {
    await waitForSocket(req.apiSocket, req.timeoutMs, () => running, req.signal);
  } catch (err) {
    vmm.kill('SIGKILL');
    throw err;
  }
  return vmm;
};

export interface HostCheck {
  binary: string;
  kernelPath: string;
  rootfsPath: string;
  kvmPath?: string;
}

/**
 * What this host lacks to run a guest, each named; empty when nothing is missing. /dev/kvm must
 * open read-write (Node cannot issue KVM_GET_API_VERSION, so openability is what is checked).
 */
export async function missingOnHost(c: HostCheck): Promise<string[]> {
  const missing: string[] = [];
  const kvm = c.kvmPath ?? '/dev/kvm';
  try {
    const fh = await open(kvm, constants.O_RDWR);
    await fh.close();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    missing.push(
      code === 'ENOENT' ? `${kvm} does not exist (no KVM on this host)` : `${kvm} cannot be opened read-write (${code ?? 'error'})`,
    );
  }
  if (!c.binary) missing.push('no firecracker binary is configured (providers.firecracker.binary)');
  else {
    try {
      await access(c.binary, constants.X_OK);
    } catch (err) {
      missing.push(
        (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? 'the firecracker binary is not there (providers.firecracker.binary)'
          : 'the firecracker binary is not executable (providers.firecracker.binary)',
      );
    }
  }
  for (const [what, path, key] of [
    ['guest kernel', c.kernelPath, 'kernel_path'],
    ['root filesystem image', c.rootfsPath, 'rootfs_path'],
  ] as const) {
    if (!path) missing.push(`no ${what} is configured (providers.firecracker.${key})`);
    else {
      try {
        await access(path, constants.R_OK);
      } catch {
        missing.push(`the ${what} is not there or not readable (providers.firecracker.${key})`);
      }
    }
  }
  return missing;
}
