/**
 * Whose socket listens on a port inside a container (DESIGN.md §8, pool previews): the kernel's
 * own tables `/proc/net/tcp` and `/proc/net/tcp6` of the container's network namespace, read by
 * an exec as the container's user (never the tenant's, never a file a tenant can write). A pool
 * preview is served only when every socket that could take the connection belongs to the tenant.
 */

/** A listening socket: its local address (dotted IPv4, or 32 hex digits of IPv6), port and owner uid. */
export interface Listener {
  address: string;
  port: number;
  uid: number;
}

const LISTEN = '0A';

/** The kernel prints each 32-bit word of an address in host byte order: little-endian here, as on every docker host sbx runs on. */
function wordBytes(hex: string): number[] {
  const out: number[] = [];
  for (let w = 0; w < hex.length; w += 8) for (let i = 6; i >= 0; i -= 2) out.push(Number.parseInt(hex.slice(w + i, w + i + 2), 16));
  return out;
}

/** Listening sockets of `/proc/net/tcp` and `tcp6` text (the two may be concatenated; headers and other states are skipped). */
export function parseListeners(text: string): Listener[] {
  const out: Listener[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || f[3] !== LISTEN) continue;
    const m = /^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/.exec(f[1]!);
    const uid = Number(f[7]);
    if (!m || !Number.isInteger(uid)) continue;
    const bytes = wordBytes(m[1]!);
    const address = bytes.length === 4 ? bytes.join('.') : bytes.map((b) => b.toString(16).padStart(2, '0')).join('');
    out.push({ address, port: Number.parseInt(m[2]!, 16), uid });
  }
  return out;
}

/** IPv4 `a.b.c.d` as the 32 hex digits of `::ffff:a.b.c.d`. */
function mapped(v4: string): string {
  return `00000000000000000000ffff${v4
    .split('.')
    .map((o) => Number(o).toString(16).padStart(2, '0'))
    .join('')}`;
}

/**
 * Whether a connection to `host:port` would reach only sockets of `uid`: every listener that
 * could take it (the wildcard or `host`, over IPv4 or IPv6 — an IPv6 wildcard may be dual-stack)
 * is the uid's, and there is one. Only IPv4 hosts are judged (a container's preview address is
 * one); anything else is refused.
 */
export function listenerOwnedBy(listeners: readonly Listener[], host: string, port: number, uid: number): boolean {
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return false;
  const reach = new Set(['0.0.0.0', host, '0'.repeat(32), mapped(host)]);
  const taking = listeners.filter((l) => l.port === port && reach.has(l.address));
  return taking.length > 0 && taking.every((l) => l.uid === uid);
}

/** The command that prints the tables (cat exits 1 where IPv6 is off: what it printed is still the whole IPv4 table). */
export const LISTENER_TABLES = ['/bin/cat', '/proc/net/tcp', '/proc/net/tcp6'];

/** A command run to completion as the container's own user, its stdout answered (the agent when up, else the engine). */
export type ContainerRun = (runtimeId: string, argv: string[], signal?: AbortSignal) => Promise<Buffer>;

/** Reads the container's tables and judges `host:port` for `uid`. */
export async function containerListenerOwned(
  run: ContainerRun,
  runtimeId: string,
  host: string,
  port: number,
  uid: number,
  signal?: AbortSignal,
): Promise<boolean> {
  return listenerOwnedBy(parseListeners((await run(runtimeId, LISTENER_TABLES, signal)).toString('latin1')), host, port, uid);
}
