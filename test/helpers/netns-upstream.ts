/**
 * An upstream host of its own for egress tests: a network namespace joined to this one by a veth
 * pair (`<net>.1` here, `<net>.2` there, in 198.18.0.0/15, the range meant for such tests), running
 * a Node server script there. Needs root.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';

export interface NetnsUpstream {
  /** The upstream's address (`<net>.2`). */
  address: string;
  close(): Promise<void>;
}

const quiet = (cmd: string, args: string[]) => new Promise<void>((resolve) => execFile(cmd, args, () => resolve()));

/** Runs a command to its end (bounded): its exit code (1 when it could not run or timed out) and output. */
export function sh(cmd: string, args: string[], timeoutMs = 30_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/**
 * Makes namespace `ns` and veth `veth` (≤ 13 characters) for the /24 `net` (e.g. `198.18.42`), then
 * runs `node script ...args` inside it and waits for its first line of stdout (it prints one when it
 * listens).
 */
export async function startNetnsUpstream(ns: string, veth: string, net: string, script: string, args: string[]): Promise<NetnsUpstream> {
  const host = `${net}.1`;
  const address = `${net}.2`;
  for (const a of [
    ['netns', 'add', ns],
    ['link', 'add', veth, 'type', 'veth', 'peer', 'name', `${veth}n`],
    ['link', 'set', `${veth}n`, 'netns', ns],
    ['addr', 'add', `${host}/24`, 'dev', veth],
    ['link', 'set', veth, 'up'],
    ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', `${veth}n`],
    ['-n', ns, 'link', 'set', `${veth}n`, 'up'],
    ['-n', ns, 'link', 'set', 'lo', 'up'],
    ['-n', ns, 'route', 'add', 'default', 'via', host],
  ])
    execFileSync('ip', a);
  const child: ChildProcess = spawn('ip', ['netns', 'exec', ns, process.execPath, script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the upstream server exited (${code}) before it listened`)));
  });
  return {
    address,
    async close() {
      child.kill('SIGKILL');
      await quiet('ip', ['netns', 'del', ns]);
      await quiet('ip', ['link', 'del', veth]);
    },
  };
}
