/**
 * The real firecracker guest agent (`sbx-agent --unix PATH`, the binary `npm run build` makes) on
 * a unix socket standing in for the guest's vsock port: what Firecracker's UDS hands the host after
 * `CONNECT 1024` is the same byte stream. The host client (agent-client.ts) talks to it directly.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { AgentClient } from '../../src/adapters/providers/firecracker/agent-client.js';
import { AGENT_VSOCK_PORT } from '../../src/adapters/providers/firecracker/agent-protocol.js';
import { requireAgentBinary } from '../docker/agent-helpers.js';
import type { FakeAgent } from './firecracker-agent.js';

export interface GuestAgent {
  socketPath: string;
  proc: ChildProcess;
  client(timeoutMs?: number): AgentClient;
  /** A raw connection to the agent (no frames sent yet). */
  raw(): Promise<Socket>;
  /** The agent's pid and those of its descendants (its per-connection handlers and their commands). */
  tree(): number[];
  stop(): Promise<void>;
}

const openSocket = (path: string) =>
  new Promise<Socket>((resolve, reject) => {
    const sock = connect({ path });
    sock.once('connect', () => {
      sock.off('error', reject);
      resolve(sock);
    });
    sock.once('error', reject);
  });

export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tasks) {
    let kids = '';
    try {
      kids = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const k of kids.split(' ').filter(Boolean)) out.push(Number(k), ...childrenOf(Number(k)));
  }
  return out;
}

/** Whether a process still runs (a zombie has finished). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Starts `binary` (default: the built agent) with `--unix <dir>/agent.sock`. */
export async function startGuestAgent(dir: string, binary = requireAgentBinary()): Promise<GuestAgent> {
  const socketPath = join(dir, 'agent.sock');
  const proc = spawn(binary, ['--unix', socketPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const deadline = Date.now() + 5_000;
  while (!existsSync(socketPath)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`sbx-agent --unix did not listen (exit ${proc.exitCode}): ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return {
    socketPath,
    proc,
    client: (timeoutMs = 5_000) => new AgentClient({ connect: () => openSocket(socketPath), timeoutMs }),
    raw: () => openSocket(socketPath),
    tree: () => [proc.pid!, ...childrenOf(proc.pid!)],
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const rest = childrenOf(proc.pid!);
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await gone;
      // Its handlers are processes of their own (and their commands with them).
      for (const pid of rest) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

/** What the guest's rcS gives it (make-firecracker-rootfs.sh): /proc, and a /dev with the usual nodes. */
const CHROOT_SETUP = [
  'mount -t tmpfs -o mode=755 tmpfs "$1/dev"',
  ...(
    [
      ['null', 1, 3],
      ['zero', 1, 5],
      ['full', 1, 7],
      ['random', 1, 8],
      ['urandom', 1, 9],
      ['tty', 5, 0],
    ] as const
  ).map(([name, major, minor]) => `mknod -m 666 "$1/dev/${name}" c ${major} ${minor}`),
  'ln -s /proc/self/fd "$1/dev/fd"',
  'exec chroot "$1" /sbin/sbx-agent --unix /run/agent.sock',
].join(' && ');

/**
 * A guest without a kernel, for the firecracker provider's tests: the real agent (already at
 * `<root>/sbin/sbx-agent`) runs chrooted into the root drive directory, as PID 1 of a PID and mount
 * namespace with its own /proc and /dev (`unshare`, root only), listening on
 * `<root>/run/agent.sock`; `udsPath` plays Firecracker's vsock socket: `CONNECT 1024\n` →
 * `OK <port>\n`, then the bytes are piped to the agent. Closing it kills the namespace.
 */
export async function startChrootGuest(udsPath: string, root: string): Promise<FakeAgent> {
  for (const d of ['run', 'proc', 'dev']) mkdirSync(join(root, d), { recursive: true });
  const inner = join(root, 'run', 'agent.sock');
  rmSync(inner, { force: true });
  const proc = spawn(
    'unshare',
    ['--pid', '--fork', '--kill-child', `--mount-proc=${join(root, 'proc')}`, 'sh', '-c', CHROOT_SETUP, 'sh', root],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root' },
    },
  );
  let stderr = '';
  proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const deadline = Date.now() + 5_000;
  while (!existsSync(inner)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`the chrooted agent did not listen: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const open = new Set<Socket>();
  const server = createServer((sock) => {
    open.add(sock);
    sock.once('close', () => open.delete(sock));
    sock.on('error', () => undefined);
    let line = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      line = Buffer.concat([line, c]);
      const nl = line.indexOf(0x0a);
      if (nl === -1) return void (line.length > 64 && sock.destroy());
      sock.off('data', onData);
      sock.pause();
      if (line.subarray(0, nl).toString('latin1') !== `CONNECT ${AGENT_VSOCK_PORT}`) return void sock.destroy();
      const guest = connect({ path: inner });
      open.add(guest);
      guest.once('close', () => open.delete(guest));
      guest.on('error', () => sock.destroy());
      guest.once('connect', () => {
        sock.write('OK 1073741824\n');
        const rest = line.subarray(nl + 1);
        if (rest.length) guest.write(rest);
        sock.pipe(guest);
        guest.pipe(sock);
        sock.resume();
      });
      // The host going away ends the guest side; the guest's end reaches the host through the pipe.
      sock.once('close', () => guest.destroy());
    };
    sock.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(udsPath, () => resolve());
  });
  return {
    server,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}
