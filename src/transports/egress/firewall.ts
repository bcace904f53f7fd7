import { execFile } from 'node:child_process';

/**
 * Host INPUT rules for the filtered network (DESIGN.md §10): from its subnet only the gateway port
 * (and the refusing DNS server on 53) reach this host; everything else to any host address is
 * rejected. Without them an internal docker network still routes to the bridge address, so a
 * sandbox would reach every host service listening on all addresses. Rules carry a comment tag,
 * are inserted idempotently (checked with `iptables -C`) and removed on shutdown.
 */
export interface FirewallSpec {
  subnet: string;
  gateway: string;
  port: number;
  /** Comment on every rule: which installation's network it guards. */
  tag: string;
}

function run(args: string[]): Promise<{ ok: boolean; stderr: string }> {
  return new Promise((resolve) => {
    execFile('iptables', ['-w', '5', ...args], { timeout: 15_000 }, (err, _stdout, stderr) =>
      resolve({ ok: !err, stderr: String(stderr) }),
    );
  });
}

/** The rules in the order they must match (first = top of INPUT). */
export function firewallRules(s: FirewallSpec): string[][] {
  const c = ['-m', 'comment', '--comment', s.tag];
  return [
    ['-s', s.subnet, '-d', s.gateway, '-p', 'tcp', '--dport', String(s.port), ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, '-d', s.gateway, '-p', 'udp', '--dport', '53', ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, '-d', s.gateway, '-p', 'tcp', '--dport', '53', ...c, '-j', 'ACCEPT'],
    ['-s', s.subnet, ...c, '-j', 'REJECT'],
  ];
}

export class Firewall {
  constructor(private readonly spec: FirewallSpec) {}

  /** True when every rule is in place, in INPUT. */
  async installed(): Promise<boolean> {
    for (const r of firewallRules(this.spec)) if (!(await run(['-C', 'INPUT', ...r])).ok) return false;
    return true;
  }

  /** Inserts the rules at the top of INPUT (accepts above the reject); a partial set is replaced. */
  async install(): Promise<void> {
    if (await this.installed()) return;
    await this.remove();
    const rules = firewallRules(this.spec);
    for (const r of [...rules].reverse()) {
      const res = await run(['-I', 'INPUT', '1', ...r]);
      if (!res.ok) {
        await this.remove();
        throw new Error(`iptables could not insert an INPUT rule: ${res.stderr.trim() || 'failed'}`);
      }
    }
  }

  /** Deletes every copy of each rule. */
  async remove(): Promise<void> {
    for (const r of firewallRules(this.spec)) {
      for (let i = 0; i < 16 && (await run(['-C', 'INPUT', ...r])).ok; i++) await run(['-D', 'INPUT', ...r]);
    }
  }
}
