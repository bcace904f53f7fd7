/**
 * The one `Host` normaliser (DESIGN.md §3 "Dev-box guard", §9): the dev-box guard and the preview
 * router read a request's host name the same way, so a name one of them accepts is the name the
 * other one sees.
 */
import { isIP } from 'node:net';

/**
 * Lower-cases a `Host` header value, strips its port and one trailing dot. An IPv6 literal keeps
 * its brackets (`[::1]:7423` → `[::1]`). Returns null for an absent, empty or malformed value
 * (a port that is not digits, an unbracketed IPv6 address, spaces, a userinfo part).
 */
export function normalizeHost(value: string | string[] | undefined): string | null {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim().toLowerCase();
  if (!raw) return null;
  let host: string;
  if (raw.startsWith('[')) {
    const end = raw.indexOf(']');
    if (end < 0) return null;
    const rest = raw.slice(end + 1);
    if (rest !== '' && !/^:\d{0,5}$/.test(rest)) return null;
    host = raw.slice(0, end + 1);
    if (isIP(host.slice(1, -1)) !== 6) return null;
    return host;
  }
  const colon = raw.indexOf(':');
  if (colon >= 0) {
    if (!/^\d{0,5}$/.test(raw.slice(colon + 1))) return null;
    host = raw.slice(0, colon);
  } else {
    host = raw;
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host === '' || !/^[a-z0-9._~!$&'()*+,;=%-]+$/.test(host)) return null;
  return host;
}

/** A normalised host (from normalizeHost) that is an IPv4 literal or a bracketed IPv6 literal. */
export function isIpLiteralHost(host: string): boolean {
  if (host.startsWith('[') && host.endsWith(']')) return isIP(host.slice(1, -1)) === 6;
  return isIP(host) === 4;
}

/**
 * A configured domain (`server.preview_domain`) in the form names are compared with: lower-case,
 * without a leading or trailing dot. '' stays '' (matches nothing).
 */
export function normalizeDomain(domain: string | undefined): string {
  return (domain ?? '').trim().toLowerCase().replace(/^\.+/, '').replace(/\.$/, '');
}

/**
 * True when `host` is a name strictly under `domain` on a label boundary (`a.preview.test` is
 * under `preview.test`; `evilpreview.test` and `preview.test` itself are not). An empty domain
 * matches nothing.
 */
export function isUnderDomain(host: string, domain: string): boolean {
  const d = normalizeDomain(domain);
  if (d === '') return false;
  return host.length > d.length + 1 && host.endsWith(`.${d}`);
}
