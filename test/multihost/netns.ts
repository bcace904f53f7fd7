/**
 * Real network hosts on one machine: network namespaces joined by veth pairs to a bridge in the
 * root namespace (which gets the .254 address so the test itself reaches every host), and real
 * `sbx` processes started inside them with `ip netns exec`. Names carry the test's pid so runs
 * never collide; leftovers of a crashed run are removed first.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'sbx.js');

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' }).toString();

/** Why this machine cannot build namespaces, or null when it can. */
export function netnsUnavailable(): string | null {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  if (spawnSync('ip', ['-V'], { stdio: 'ignore' }).status !== 0) return 'the ip command (iproute2) is missing';
  const probe = `sbxprobe${process.pid % 100000}`;
  const r = spawnSync('ip', ['netns', 'add', probe], { stdio: 'pipe' });
  if (r.status !== 0) return `ip netns add failed: ${r.stderr.toString().trim()}`;
  spawnSync('ip', ['netns', 'del', probe], { stdio: 'ignore' });
  return null;
}

export interface Host {
  name: string;
  ns: string;
  addr: string;
  /** The root-namespace end of its link: `down` cuts the host off. */
  link: string;
}

export interface Net {
  subnet: string;
  gateway: string;
  hosts: Record<string, Host>;
  cut(host: string): void;
  restore(host: string): void;
  destroy(): void;
}

/** Removes namespaces and links of earlier runs of this suite (prefix `sx`). */
export function sweepStale(): void {
  for (const line of spawnSync('ip', ['netns', 'list'], { stdio: 'pipe' }).stdout.toString().split('\n')) {
    const name = line.split(' ')[0] ?? '';
    if (/^sx\d+[a-z]\d?$/.test(name)) spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  }
  for (const line of spawnSync('ip', ['-o', 'link', 'show'], { stdio: 'pipe' }).stdout.toString().split('\n')) {
    const m = /^\d+: (sx\d+[a-z0-9]*)[@:]/.exec(line);
    if (m) spawnSync('ip', ['link', 'del', m[1]!], { stdio: 'ignore' });
  }
  for (const line of spawnSync('iptables', ['-S', 'FORWARD'], { stdio: 'pipe' }).stdout?.toString().split('\n') ?? []) {
    if (/^-A FORWARD -i sx\d+br -o sx\d+br -j ACCEPT$/.test(line))
      spawnSync('iptables', ['-D', ...line.slice(3).split(' ')], { stdio: 'ignore' });
  }
}

/** Builds the hosts (`names[i]` gets `.i+1`) on a /24 chosen from the pid. */
export function buildNet(names: string[]): Net {
  const tag = `sx${process.pid % 10000}`;
  const octet = 100 + (process.pid % 100);
  const subnet = `10.${octet}.77`;
  const bridge = `${tag}br`;
  ip('link', 'add', bridge, 'type', 'bridge');
  ip('addr', 'add', `${subnet}.254/24`, 'dev', bridge);
  ip('link', 'set', bridge, 'up');
  // Docker's FORWARD policy is DROP, and bridged frames pass iptables (br_netfilter): let ours through.
  const rule = ['FORWARD', '-i', bridge, '-o', bridge, '-j', 'ACCEPT'];
  const iptables = spawnSync('iptables', ['-I', ...rule], { stdio: 'ignore' }).status === 0;
  const hosts: Record<string, Host> = {};
  names.forEach((name, i) => {
    const ns = `${tag}${String.fromCharCode(97 + i)}`;
    const outer = `${ns}o`;
    const inner = `${ns}i`;
    ip('netns', 'add', ns);
    ip('link', 'add', outer, 'type', 'veth', 'peer', 'name', inner);
    ip('link', 'set', inner, 'netns', ns);
    ip('link', 'set', outer, 'master', bridge);
    ip('link', 'set', outer, 'up');
    ip('-n', ns, 'addr', 'add', `${subnet}.${i + 1}/24`, 'dev', inner);
    ip('-n', ns, 'link', 'set', inner, 'up');
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    hosts[name] = { name, ns, addr: `${subnet}.${i + 1}`, link: outer };
  });
  return {
    subnet,
    gateway: `${subnet}.254`,
    hosts,
    cut: (h) => void ip('link', 'set', hosts[h]!.link, 'down'),
    restore: (h) => void ip('link', 'set', hosts[h]!.link, 'up'),
    destroy() {
      for (const h of Object.values(hosts)) spawnSync('ip', ['netns', 'del', h.ns], { stdio: 'ignore' });
      spawnSync('ip', ['link', 'del', bridge], { stdio: 'ignore' });
      if (iptables) spawnSync('iptables', ['-D', ...rule], { stdio: 'ignore' });
    },
  };
}

export interface Proc {
  child: ChildProcess;
  log(): string;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `sbx …` inside a namespace with its own HOME; resolves once `ready` matches its output. */
export async function startSbx(
  host: Host,
  home: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 20_000,
): Promise<Proc> {
  mkdirSync(home, { recursive: true });
  const child = spawn('ip', ['netns', 'exec', host.ns, process.execPath, BIN, ...args], {
    cwd: home,
    env: { PATH: process.env.PATH ?? '', HOME: home, SVC_LOGGING_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const proc: Proc = {
    child,
    log: () => out,
    exited,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 35_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  const deadline = Date.now() + timeoutMs;
  while (!ready.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx ${args[0]} in ${host.name} did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return proc;
}
