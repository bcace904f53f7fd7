import type { FastifyInstance } from 'fastify';
import { realmOf } from '../realm.js';
import { SbxError } from '../../../core/errors.js';
import type { HttpDeps } from '../deps.js';
import { isIpLiteralHost, isUnderDomain, normalizeHost } from '../../shared/host.js';

export const ORIGIN_REFUSED =
  "origin is not allowed: while auth is off the dev-box guard admits only localhost origins, this server's own " +
  'origin and the origins listed in server.cors_allowed_origins';
export const HOST_REFUSED =
  'host name is not allowed: while auth is off the dev-box guard (against DNS rebinding) answers only IP ' +
  "addresses, localhost, this machine's host name and the names in server.allowed_hosts";

/** What the guard admits, derived once from the deps (DESIGN.md §3 "Dev-box guard"). */
export interface GuardRules {
  /** Normalised host names besides IP literals and `localhost`: this machine's name, `server.allowed_hosts`. */
  hosts: Set<string>;
  /** `server.preview_domain` ('' = none). */
  previewDomain: string;
  /** Serialised origins of the explicit `server.cors_allowed_origins` entries (the wildcard and `null` never count). */
  origins: Set<string>;
}

export function guardRules(deps: Pick<HttpDeps, 'settings' | 'corsAllowedOrigins' | 'allowedHosts'>): GuardRules {
  const hosts = new Set<string>(['localhost']);
  for (const name of [deps.settings.hostname, ...(deps.allowedHosts ?? [])]) {
    const h = normalizeHost(name);
    if (h) hosts.add(h);
  }
  const origins = new Set<string>();
  for (const entry of deps.corsAllowedOrigins) {
    const u = parseOrigin(entry.trim());
    if (u) origins.add(u.origin);
  }
  return { hosts, previewDomain: deps.settings.preview_domain ?? '', origins };
}

/**
 * An `Origin` value as a browser sends it: http or https, a host, nothing else (no path beyond
 * `/`, query, fragment or userinfo). `null`, other schemes and garbage → null.
 */
export function parseOrigin(value: string): URL | null {
  if (value === '' || value === 'null') return null;
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  if (u.hostname === '' || u.username !== '' || u.password !== '' || u.pathname !== '/' || u.search !== '' || u.hash !== '') return null;
  return u;
}

const LOOPBACK_V4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** The normalised `Host` passes: an IP literal, localhost, this machine, an allowed name, or under the preview domain. */
export function hostAllowed(host: string, rules: GuardRules): boolean {
  return isIpLiteralHost(host) || rules.hosts.has(host) || isUnderDomain(host, rules.previewDomain);
}

/**
 * The `Origin` passes: a loopback origin (`localhost`, 127.0.0.0/8, `[::1]`, any port), an explicit
 * list entry, or the request's own origin (`ownOrigin`, built from a Host that passed). Never an
 * origin under the preview domain: those pages are sandbox content.
 */
export function originAllowed(value: string, rules: GuardRules, ownOrigin: string | null): boolean {
  const u = parseOrigin(value);
  if (!u) return false;
  const h = u.hostname;
  if (isUnderDomain(h, rules.previewDomain)) return false;
  if (h === 'localhost' || LOOPBACK_V4.test(h) || h === '[::1]') return true;
  if (rules.origins.has(u.origin)) return true;
  return ownOrigin !== null && u.origin === ownOrigin;
}

function ownOriginOf(scheme: string, rawHost: string): string | null {
  try {
    return new URL(`${scheme}://${rawHost}`).origin;
  } catch {
    return null;
  }
}

/**
 * The dev-box guard (DESIGN.md §3, a deliberate deviation, §4): while auth is off an open server
 * must not be drivable by web pages or DNS rebinding. Runs on every API request (and any request
 * no route matched) before CORS, auth and the routes: a `Host` that is not a local, allowed or
 * preview name → 403; an `Origin` that is present and not trusted → 403 (a refused preflight
 * gets no Access-Control-Allow-Origin, since CORS never ran). Requests without `Origin` are
 * non-browser clients and pass. With auth on it is not registered: the spec's CORS rules stand alone.
 */
export function guardPlugin(app: FastifyInstance, deps: HttpDeps): void {
  if (deps.auth.enabled) return;
  const rules = guardRules(deps);

  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url;
    // A matched route outside /api/v1 is not API traffic (the dashboard's assets, later previews).
    // The replica RPC is machine-to-machine with a signed token no browser holds (DESIGN §7).
    if (route !== undefined && (realmOf(route) === 'outside' || realmOf(route) === 'rpc')) return;

    const rawHost = request.headers.host;
    // HTTP/1.0 clients may omit Host; browsers (the only ones a rebinding attack can use) never do.
    if (rawHost !== undefined) {
      const host = normalizeHost(rawHost);
      if (host === null || !hostAllowed(host, rules)) throw new SbxError('forbidden', HOST_REFUSED);
    }
    const rawOrigin = request.headers.origin;
    if (rawOrigin === undefined) return;
    const origin = Array.isArray(rawOrigin) ? (rawOrigin[0] ?? '') : rawOrigin;
    const own = rawHost !== undefined ? ownOriginOf(request.protocol, rawHost) : null;
    if (!originAllowed(origin.trim(), rules, own)) throw new SbxError('forbidden', ORIGIN_REFUSED);
  });
}
