import { execFile } from 'node:child_process';

/**
 * Host INPUT rules for the filtered network (DESIGN.md §10): from its subnet only the gateway port
 * (and the refusing DNS server on 53) reach this host, and replies to connections the host opened
 * (conntrack ESTABLISHED, and RELATED ICMP errors: a preview's proxy reaching a sandbox's server); everything else
 * to any host address is rejected. Without them an internal docker network still routes to the
 * bridge address, so a sandbox would reach every host service listening on all addresses. Every
 * rule carries the network's tag as its comment, which is how a start finds and removes what a
 * killed earlier run left (whatever its subnet), and how an install leaves no duplicates.
 */
export interface FirewallSpec {
  subnet: string;
  gateway: string;
  port: number;
  /** Comment on every rule: which installation's network it guards (`filteredNames().ruleTag`). */
  tag: string;
}

/** A tag is one token of `iptables -S` (no quoting), within the comment match's 256 bytes. */
const TAG = /^[A-Za-z0-9_.:-]{1,200}$/;

function run(args: string[]): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('iptables', ['-w', '5', ...args], { timeout: 15_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ ok: !err, stdout: String(stdout), stderr: String(stderr) }),
    );
  });
}

function checkTag(tag: string): string {
  if (!TAG.test(tag)) throw new Error(`bad firewall rule tag ${JSON.stringify(tag)}`);
  return tag;
}

/** The tag of the short-lived reject-all that keeps the subnet shut while an install replaces rules. */
const guardTag = (tag: string) => `${tag}:guard`;

/** The rules in the order they must match (first = top of INPUT). */
export function firewallRules(s: FirewallSpec): string[][] {
  const c = ['-m', 'comment', '--comment', s.tag];
  return [
    ['-s', s.subnet, '-m', 'conntrack', '--ctstate', 'ESTABLISHED', ...c, '-j', 'ACCEPT'],
    // RELATED for ICMP only (unreachable, fragmentation needed): never a connection a conntrack helper expects.
    ['-s', s.subnet, '-p', 'icmp', '-m', 'conntrack', '--ctstate', 'RELATED', ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, '-d', s.gateway, '-p', 'tcp', '--dport', String(s.port), ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, '-d', s.gateway, '-p', 'udp', '--dport', '53', ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, '-d', s.gateway, '-p', 'tcp', '--dport', '53', ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, ...c, '-j', 'REJECT'],
  ];
}

/** INPUT rules whose comment is `tag` (or its guard's), as `iptables -S` prints them without `-A INPUT`, in chain order. */
export async function taggedRules(tag: string): Promise<string[][]> {
  checkTag(tag);
  const listed = await run(['-S', 'INPUT']);
  if (!listed.ok) throw new Error(`iptables could not list INPUT: ${listed.stderr.trim() || 'failed'}`);
  const out: string[][] = [];
  for (const line of listed.stdout.split('\n')) {
    const words = ruleWords(line);
    if (words[0] !== '-A' || words[1] !== 'INPUT') continue;
    const at = words.indexOf('--comment');
    const comment = at >= 0 ? words[at + 1] : undefined;
    if (comment === tag || comment === guardTag(tag)) out.push(words.slice(2));
  }
  return out;
}

/** The words of an `iptables -S` line: blanks split them, double quotes (with backslash escapes) group them, as the shell would. */
export function ruleWords(line: string): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) words.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]!);
  return words;
}

/** Deletes every INPUT rule carrying `tag` (or its guard's): a killed run's leftovers, any subnet. */
export async function removeTaggedRules(tag: string): Promise<void> {
  for (const rule of await taggedRules(tag)) await run(['-D', 'INPUT', ...rule]);
}

export class Firewall {
  constructor(private readonly spec: FirewallSpec) {
    checkTag(spec.tag);
  }

  /** True when exactly these rules carry the tag in INPUT (no stale or duplicate ones), the reject last. */
  async installed(): Promise<boolean> {
    const rules = firewallRules(this.spec);
    const tagged = await taggedRules(this.spec.tag);
    if (tagged.length !== rules.length || !tagged[tagged.length - 1]!.includes('REJECT')) return false;
    for (const r of rules) if (!(await run(['-C', 'INPUT', ...r])).ok) return false;
    return true;
  }

  /**
   * Inserts the rules at the top of INPUT (accepts above the reject). Rules an earlier run left
   * (partial, duplicated, another subnet) are replaced behind a guard that rejects the subnet
   * meanwhile, so sandboxes still attached never see an open host.
   */
  async install(): Promise<void> {
    if (await this.installed()) return;
    const old = await taggedRules(this.spec.tag);
    const guard = ['-s', this.spec.subnet, '-m', 'comment', '--comment', guardTag(this.spec.tag), '-j', 'REJECT'];
    const insert = async (rule: string[]) => {
      const res = await run(['-I', 'INPUT', '1', ...rule]);
      if (!res.ok) throw new Error(`iptables could not insert an INPUT rule: ${res.stderr.trim() || 'failed'}`);
    };
    try {
      if (old.length > 0) {
        await insert(guard);
        for (const rule of old) await run(['-D', 'INPUT', ...rule]);
      }
      for (const r of [...firewallRules(this.spec)].reverse()) await insert(r);
      if (old.length > 0) await run(['-D', 'INPUT', ...guard]);
    } catch (err) {
      // With nothing there before, nothing is attached yet: leave nothing. Else the guard stays (fail closed).
      if (old.length === 0) await this.remove();
      throw err;
    }
  }

  /** Deletes every rule with the tag. */
  async remove(): Promise<void> {
    await removeTaggedRules(this.spec.tag);
  }
}
