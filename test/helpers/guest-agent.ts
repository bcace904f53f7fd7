/**
 * The real firecracker guest agent (`sbx-agent --unix PATH`, the binary `npm run build` makes) on
 * a unix socket standing in for the guest's vsock port: what Firecracker's UDS hands the host after
 * `CONNECT 1024` is the same byte stream. The host client (agent-client.ts) talks to it directly.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { AgentClient } from '../../src/adapters/providers/firecracker/agent-client.js';
import { requireAgentBinary } from '../docker/agent-helpers.js';

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
