/**
 * What the egress gateway does to a request it sees in clear (DESIGN.md §15): strict checks, then
 * the sandbox's placeholders replaced by their secrets' values in header values only. Pure: the
 * sockets live in intercept.ts (TLS tunnels) and gateway.ts (plain HTTP).
 */
import { formatIp, parseTarget, ruleMatches, type Target } from '../../core/network/index.js';
import type { BoundSecret } from '../../core/secrets/port.js';

/** A header as it came: name and one value (repeated headers are repeated pairs). */
export type HeaderPair = [name: string, value: string];

export interface Refusal {
  status: 400 | 403 | 405;
  text: string;
}

/** Pairs from a `rawHeaders` array (`[name, value, name, value, …]`). */
export function pairsOf(raw: readonly string[]): HeaderPair[] {
  const out: HeaderPair[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}

/** `name`, or the canonical text of an IP: what two spellings of one host compare as. */
function hostKey(target: Target): string {
  return target.kind === 'name' ? target.name : formatIp(target.ip);
}

/** Whether `authority` (`host[:port]`, `[v6][:port]`) names the tunnel's host and port (no port: 443 for https). */
export function authorityMatches(authority: string, target: Target, port: number, defaultPort = 443): boolean {
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::([1-9][0-9]{0,4}))?$/.exec(authority.trim());
  if (!m) return false;
  const t = parseTarget(m[1]!);
  if (!t || hostKey(t) !== hostKey(target)) return false;
  return (m[2] === undefined ? defaultPort : Number(m[2])) === port;
}

/**
 * Strict checks of a request in an intercepted tunnel: TRACE → 405; Content-Length beside
 * Transfer-Encoding, repeated Content-Length or Host, a `Host` (HTTP/1.1: required) or
 * `:authority` (HTTP/2) other than the CONNECT host → 400. Null: it may go on.
 */
export function strictRefusal(
  method: string,
  pairs: readonly HeaderPair[],
  target: Target,
  port: number,
  authority?: string,
): Refusal | null {
  if (method.toUpperCase() === 'TRACE') return { status: 405, text: 'sbx egress: TRACE is refused' };
  const count = (name: string) => pairs.filter(([k]) => k.toLowerCase() === name).length;
  const cl = count('content-length');
  if (cl > 0 && count('transfer-encoding') > 0)
    return { status: 400, text: 'sbx egress: a request with both Content-Length and Transfer-Encoding is refused' };
  if (cl > 1) return { status: 400, text: 'sbx egress: repeated Content-Length' };
  const hosts = pairs.filter(([k]) => k.toLowerCase() === 'host').map(([, v]) => v);
  if (hosts.length > 1) return { status: 400, text: 'sbx egress: repeated Host' };
  const named = authority === undefined ? hosts : [authority, ...hosts];
  if (named.length === 0) return { status: 400, text: 'sbx egress: the request names no host' };
  if (!named.every((h) => authorityMatches(h, target, port)))
    return { status: 400, text: 'sbx egress: the request names another host than its tunnel' };
  return null;
}

const FIND = /sbx_secret_[0-9a-f]{32}/g;
/** Bytes a header value may not hold once a value is in it (no header splitting). */
const BAD_HEADER_CHARS = /[\r\n\0]/;

/** The placeholders in a text, with those inside `Basic` credentials (decoded). */
function placeholdersIn(text: string): string[] {
  const found: string[] = [...(text.match(FIND) ?? [])];
  const basic = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(text);
  if (basic) found.push(...(Buffer.from(basic[1]!, 'base64').toString('latin1').match(FIND) ?? []));
  return found;
}

export type Rewritten =
  | { ok: true; pairs: HeaderPair[]; injected: number }
  | { ok: false; refusal: Refusal; placeholder: 'foreign' | 'host' | 'plain' };

/**
 * The sandbox's placeholders replaced in header values (`Basic` credentials decoded, replaced,
 * re-encoded) for the secrets whose hosts name host:port — and, over plain HTTP, were created
 * with `allowPlainHttp`. The URL (path, query) is never changed. Any placeholder in the URL or
 * the headers that is not such a secret's is refused (403): another sandbox's, or one whose hosts
 * do not name this host, or a plain-HTTP request for a secret that does not allow it.
 */
export function injectSecrets(
  pairs: readonly HeaderPair[],
  url: string,
  secrets: readonly BoundSecret[],
  target: Target,
  port: number,
  plain: boolean,
): Rewritten {
  const mine = new Map(secrets.map((s) => [s.placeholder, s]));
  const values = new Map<string, string>();
  const seen = [...(url.match(FIND) ?? [])];
  for (const [k, v] of pairs) seen.push(...placeholdersIn(k), ...placeholdersIn(v));
  for (const p of seen) {
    const s = mine.get(p);
    if (!s) return refused('foreign', 'a placeholder that is not one of this sandbox');
    if (!s.hosts.some((r) => ruleMatches(r, target, port))) return refused('host', `secret ${s.name} is not for this host`);
    if (plain && !s.allowPlainHttp) return refused('plain', `secret ${s.name} does not allow plain HTTP (use https)`);
    values.set(p, s.value);
  }
  if (values.size === 0) return { ok: true, pairs: pairs.map(([k, v]) => [k, v]), injected: 0 };
  let injected = 0;
  const replace = (text: string) =>
    text.replace(FIND, (p) => {
      injected++;
      return values.get(p)!;
    });
  const out: HeaderPair[] = [];
  for (const [k, v] of pairs) {
    const basic = /^(\s*basic\s+)([A-Za-z0-9+/=_-]+)(\s*)$/i.exec(v);
    let next = replace(v);
    if (basic) {
      const decoded = Buffer.from(basic[2]!, 'base64').toString('latin1');
      if (decoded.match(FIND)) next = `${basic[1]}${Buffer.from(replace(decoded), 'latin1').toString('base64')}${basic[3]}`;
    }
    if (next !== v && BAD_HEADER_CHARS.test(next)) return refused('host', 'a secret value cannot go in a header');
    out.push([k, next]);
  }
  return { ok: true, pairs: out, injected };
}

function refused(placeholder: 'foreign' | 'host' | 'plain', why: string): Rewritten {
  return { ok: false, placeholder, refusal: { status: 403, text: `sbx egress: denied (secret_not_allowed): ${why}` } };
}

/** Hop-by-hop and proxy headers that never go on to an upstream; `expect` too (the gateway answers 100 itself). */
const HOP = /^(connection|keep-alive|proxy-.*|te|trailer|transfer-encoding|upgrade|expect|host|http2-settings)$/i;

/** Pairs that go on to the upstream (hop-by-hop ones dropped; `Host` is set by the caller). */
export function forwardPairs(pairs: readonly HeaderPair[]): HeaderPair[] {
  return pairs.filter(([k]) => !HOP.test(k) && !k.startsWith(':'));
}

/** As `forwardPairs`, as one raw list (`[name, value, …]`, what node:http takes) after `front`: one pass, one array. */
export function forwardRaw(pairs: readonly HeaderPair[], front: readonly string[] = []): string[] {
  const out = [...front];
  for (const [k, v] of pairs) if (!HOP.test(k) && !k.startsWith(':')) out.push(k, v);
  return out;
}

/** As `forwardRaw`, from a raw list (`rawHeaders`). */
export function forwardRawList(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (!HOP.test(raw[i]!) && !raw[i]!.startsWith(':')) out.push(raw[i]!, raw[i + 1]!);
  return out;
}

/**
 * The headers of a plain-HTTP proxy request as they go on (proxy and hop headers dropped, `Host`
 * set by the caller), with the placeholders of secrets that allow plain HTTP replaced; any other
 * placeholder → 403; `secrets` failing (it fails closed) → 502. `secrets` null: no secrets here.
 */
export async function plainHeaders(
  raw: readonly string[],
  url: string,
  secrets: (() => Promise<readonly BoundSecret[]>) | null,
  target: Target,
  port: number,
): Promise<{ headers: Record<string, string | string[]>; injected: boolean } | { status: number; text: string }> {
  let pairs = pairsOf(raw);
  let injected = false;
  if (secrets) {
    let bound: readonly BoundSecret[];
    try {
      bound = await secrets();
    } catch {
      return { status: 502, text: 'sbx egress: the secrets of this sandbox are unavailable' };
    }
    const rw = injectSecrets(pairs, url, bound, target, port, true);
    if (!rw.ok) return rw.refusal;
    pairs = rw.pairs;
    injected = rw.injected > 0;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of pairs) {
    const key = k.toLowerCase();
    if (/^(proxy-|host$|connection$|keep-alive$)/.test(key)) continue;
    const had = headers[key];
    headers[key] = had === undefined ? v : [...(Array.isArray(had) ? had : [had]), v];
  }
  return { headers, injected };
}
