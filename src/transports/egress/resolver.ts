/**
 * How the egress gateway resolves a name (DESIGN.md §10): as the host does — the hosts file first,
 * then DNS — but never through `dns.lookup`, whose getaddrinfo calls would tie up Node's shared
 * thread pool: the hosts file is parsed here (and re-read when it changes, checked at most once a
 * second), and DNS goes through a `node:dns` Resolver of its own (c-ares, asynchronous).
 */
import { Resolver } from 'node:dns';
import { open, stat } from 'node:fs/promises';
import { canonicalName, parseIp } from '../../core/network/index.js';

export const HOSTS_PATH = '/etc/hosts';
/** How often the hosts file is stat'ed at most. */
const CHECK_EVERY_MS = 1_000;
/** Bytes of the hosts file read at most (the rest is ignored). */
const MAX_HOSTS_BYTES = 16 << 20;

/**
 * A hosts file's names → address (`address name [alias…]` per line). `#` starts a comment; names
 * compare as the gateway's targets do (lower-case, one trailing dot stripped, IDNA A-labels); the
 * first line that names a host wins; a line whose address is not a strict IPv4 or IPv6 literal is
 * ignored, and so is a field that is not a host name.
 */
export function parseHosts(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const hash = raw.indexOf('#');
    const fields = (hash >= 0 ? raw.slice(0, hash) : raw).split(/[ \t\r\f\v]+/).filter((f) => f !== '');
    if (fields.length < 2) continue;
    const address = fields[0]!;
    if (!parseIp(address)) continue;
    for (const field of fields.slice(1)) {
      const name = canonicalName(field);
      if (name && !out.has(name)) out.set(name, address);
    }
  }
  return out;
}

/** A hosts file, re-read when its identity, size or modification time changes (stat at most once per `checkEveryMs`). */
export class HostsFile {
  private names = new Map<string, string>();
  private seen = '';
  private checkedAt = -Infinity;
  private checking: Promise<void> | null = null;

  constructor(
    readonly path = HOSTS_PATH,
    private readonly checkEveryMs = CHECK_EVERY_MS,
  ) {}

  /** The address the hosts file gives `name` (canonical), or null. */
  async lookup(name: string): Promise<string | null> {
    // Lookups that come while a check runs wait for it (the first one's answer included).
    if (!this.checking && Date.now() - this.checkedAt >= this.checkEveryMs) {
      this.checking = this.refresh().finally(() => {
        this.checking = null;
      });
    }
    await this.checking;
    return this.names.get(name) ?? null;
  }

  private async refresh(): Promise<void> {
    this.checkedAt = Date.now();
    let st: { dev: number; ino: number; size: number; mtimeMs: number; ctimeMs: number };
    try {
      st = await stat(this.path);
    } catch {
      // No hosts file (or unreadable): names come from DNS alone.
      this.names = new Map();
      this.seen = '';
      return;
    }
    const identity = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    if (identity === this.seen) return;
    try {
      this.names = parseHosts(await readPrefix(this.path, MAX_HOSTS_BYTES));
      this.seen = identity;
    } catch {
      this.names = new Map();
      this.seen = '';
    }
  }
}

async function readPrefix(path: string, max: number): Promise<string> {
  const file = await open(path, 'r');
  try {
    const buf = Buffer.alloc(Math.min(max, (await file.stat()).size));
    const { bytesRead } = await file.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('utf8');
  } finally {
    await file.close();
  }
}

/** DNS through a `node:dns` Resolver of its own (not the system's getaddrinfo): A then AAAA, 5 s. */
export async function dnsResolve(name: string): Promise<string[]> {
  const r = new Resolver({ timeout: 5_000, tries: 1 });
  const [a, aaaa] = await Promise.allSettled([
    new Promise<string[]>((res, rej) => r.resolve4(name, (e, xs) => (e ? rej(e) : res(xs)))),
    new Promise<string[]>((res, rej) => r.resolve6(name, (e, xs) => (e ? rej(e) : res(xs)))),
  ]);
  return [...(a.status === 'fulfilled' ? a.value : []), ...(aaaa.status === 'fulfilled' ? aaaa.value : [])];
}

/** Name → addresses as the host resolves: the hosts file's answer when it has one, else DNS. */
export function hostResolver(
  hosts = new HostsFile(),
  dns: (name: string) => Promise<string[]> = dnsResolve,
): (name: string) => Promise<string[]> {
  return async (name) => {
    const known = await hosts.lookup(name);
    return known !== null ? [known] : dns(name);
  };
}
