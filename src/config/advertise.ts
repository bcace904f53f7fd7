/**
 * Where other replicas reach this one's worker RPC (DESIGN.md §7 "Replicas that run sandboxes
 * themselves"): `server.advertise_url`, else `http://<server.host>:<port>` when the host is a
 * specific address, else the machine's hostname (a wildcard address names no one machine).
 */
import { hostname } from 'node:os';
import type { SbxConfig } from './types.js';

const WILDCARD = new Set(['0.0.0.0', '::', '[::]', '']);

/** The advertised base URL (no trailing slash); `port` is the listener's real one when known. */
export function advertiseUrl(config: SbxConfig, port = config.server.port): string {
  const given = config.server.advertise_url.trim();
  if (given !== '') return given.replace(/\/+$/, '');
  const host = config.server.host.trim();
  const name = WILDCARD.has(host) ? hostname() : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `http://${name}:${port}`;
}

/** True for a loopback host name or address (`localhost`, 127/8, ::1). */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::1';
}

/** The host of a PostgreSQL DSN (URL or `key=value` form); null when none is named (a local socket). */
export function dsnHost(dsn: string | undefined): string | null {
  if (!dsn) return null;
  if (/^postgres(ql)?:\/\//i.test(dsn)) {
    try {
      const host = new URL(dsn).hostname;
      return host === '' ? null : host;
    } catch {
      return null;
    }
  }
  const m = /(?:^|\s)host\s*=\s*'?([^\s']+)/i.exec(dsn);
  return m ? m[1]! : null;
}
