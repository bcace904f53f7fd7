import { readdir, readFile } from 'node:fs/promises';
import { constants } from 'node:os';

/**
 * The processes of an exec, from /proc (Linux): its process group (a launcher's) or its process
 * tree (a command a keeper's guest started), which signals and kills reach, and whether a guest
 * wrapper among them is ready to take a signal.
 */

export interface Member {
  pid: number;
  ppid: number;
  /** Signals with a handler installed (bit n-1 for signal n). */
  caught: bigint;
  /** It is the guest wrapper of isolation.ts (still starting, or waiting for the command). */
  wrapper: boolean;
  /** Its parent is the wrapper: with `wrapper`, a copy forked to run the command, not yet replaced by it. */
  forked: boolean;
}

/** How the guest wrapper's command line begins (isolation.ts GUEST_WRAPPER). */
const WRAPPER_CMDLINE = '/bin/sh\0-c\0unset __sbx_s;';

/**
 * The processes of group `pgid` but its leader (and with `spareChildren` the leader's children)
 * (Linux /proc).
 */
export async function groupMembers(pgid: number, spareChildren: boolean): Promise<Member[]> {
  const members: Member[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name) || Number(name) === pgid) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // Fields after the command name `(…)`: state, ppid, pgrp, …
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    if (spareChildren && Number(fields[1]) === pgid) continue;
    const status = await readFile(`/proc/${name}/status`, 'utf8').catch(() => '');
    const cgt = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const wrapper = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    const forked = wrapper && (await readFile(`/proc/${fields[1]}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    members.push({ pid: Number(name), ppid: Number(fields[1]), caught: cgt ? BigInt(`0x${cgt}`) : 0n, wrapper, forked });
  }
  return members;
}

/**
 * Whether the command can take `sig` now: someone is there to get it, and a guest wrapper among
 * them has its traps installed (before that, a signal can be lost in its start-up: proot's
 * loader drops them), so it either passes to the command or is remembered by the wrapper.
 */
export function readyFor(members: Member[], sig: NodeJS.Signals): boolean {
  const n = constants.signals[sig];
  if (members.length === 0) return false;
  if (n === undefined) return true;
  return members.every((m) => {
    if (!m.wrapper) return true;
    // A copy of the wrapper forked to run the command but not yet replaced by it still carries the
    // wrapper's traps: a signal now would be swallowed. Wait until it is the command.
    if (m.forked) return false;
    return ((m.caught >> BigInt(n - 1)) & 1n) === 1n;
  });
}

/**
 * How long a signal sent before the wrapper started the command waits for it (then it is sent
 * anyway). A window of a few instructions remains between the wrapper's last look at a remembered
 * signal and its fork of the command; a signal landing exactly there still reaches only the wrapper.
 */
export const SIGNAL_WAIT_MS = 10_000;

/**
 * Sends `sig` to the processes `list` gives once they can take it (readyFor), waiting (bounded)
 * while the command runs; then to whoever is there.
 */
export async function signalWhenReady(list: () => Promise<Member[]>, sig: NodeJS.Signals, running: () => boolean): Promise<void> {
  const until = performance.now() + SIGNAL_WAIT_MS;
  let members = await list();
  while (!readyFor(members, sig) && running() && performance.now() < until) {
    await new Promise((r) => setTimeout(r, 20));
    members = await list();
  }
  for (const m of members) {
    try {
      process.kill(m.pid, sig);
    } catch {
      // Gone meanwhile.
    }
  }
}

/** The process tree rooted at `root` (root included), from /proc. */
export async function treeMembers(root: number): Promise<Member[]> {
  const parent = new Map<number, number>();
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  if (!parent.has(root)) return [];
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid, depth = 0; p !== undefined && p > 1 && depth < 512; p = parent.get(p), depth++)
      if (p === root) return true;
    return false;
  };
  const members: Member[] = [];
  for (const pid of parent.keys()) {
    if (!inTree(pid)) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const cgt = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const ppid = parent.get(pid)!;
    const wrapper = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    const forked = wrapper && (await readFile(`/proc/${ppid}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    members.push({ pid, ppid, caught: cgt ? BigInt(`0x${cgt}`) : 0n, wrapper, forked });
  }
  return members;
}

/** SIGKILLs the process tree rooted at `root`, twice (a process forked meanwhile is caught by the second pass). */
export async function killTree(root: number): Promise<void> {
  for (let pass = 0; pass < 2; pass++) {
    for (const m of await treeMembers(root)) {
      try {
        process.kill(m.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  }
}

/** SIGKILLs the members of group `pgid` but its leader (and with `spareChildren` the leader's children). */
export async function killMembers(pgid: number, spareChildren: boolean): Promise<void> {
  // Twice: a process forked while the first pass ran is caught by the second.
  for (let pass = 0; pass < 2; pass++) {
    for (const m of await groupMembers(pgid, spareChildren)) {
      try {
        process.kill(m.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  }
}
