import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';
import { realmOf, type Realm } from './realm.js';

/**
 * One registered route (one method): the single table that auth (its route matrix), the OpenAPI
 * document and the 404/405 answers read, and whose `metric` is the request metrics' route label.
 */
export interface RouteEntry {
  method: string;
  url: string;
  /** Which credential the route needs (DESIGN.md §3 "Auth"). */
  realm: Realm;
  schema?: FastifySchema;
  /** A WebSocket route: the same hooks run for its upgrade request. */
  websocket?: boolean;
  /** The `route` label of the HTTP request metrics: the URL template, never the raw URL. */
  metric: string;
  /** Matches a request path (query removed) against the URL template, trailing slash allowed. */
  pattern: RegExp;
}

const tables = new WeakMap<FastifyInstance, RouteEntry[]>();

function patternOf(url: string): RegExp {
  const source = url
    .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    .replace(/:[A-Za-z_]+/g, '[^/]+')
    .replace(/\*/g, '.*');
  return new RegExp(`^${source}/?$`);
}

/**
 * Records every route added after this call (child plugins included), HEAD twins too; call once,
 * before any route. Returns the live table.
 */
export function installRouteTable(app: FastifyInstance): readonly RouteEntry[] {
  const existing = tables.get(app);
  if (existing) return existing;
  const table: RouteEntry[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (opts: RouteOptions) => {
    const websocket = Boolean((opts as { wsHandler?: unknown }).wsHandler || (opts as { websocket?: unknown }).websocket);
    const pattern = patternOf(opts.url);
    for (const m of Array.isArray(opts.method) ? opts.method : [opts.method]) {
      const entry: RouteEntry = { method: m.toUpperCase(), url: opts.url, realm: realmOf(opts.url), metric: opts.url, pattern };
      if (opts.schema) entry.schema = opts.schema as FastifySchema;
      if (websocket) entry.websocket = true;
      table.push(entry);
    }
  });
  return table;
}

/**
 * The table entry of a matched route (method and URL template), or undefined for a request no
 * route matched: what the request metrics label it with.
 */
export function routeEntry(table: readonly RouteEntry[], method: string, url: string | undefined): RouteEntry | undefined {
  if (url === undefined) return undefined;
  const m = method.toUpperCase();
  return table.find((r) => r.url === url && r.method === m);
}

/** Every registered route except HEAD twins (e.g. for tests that must cover every route). */
export function routeTable(app: FastifyInstance): RouteEntry[] {
  return (tables.get(app) ?? []).filter((r) => r.method !== 'HEAD');
}

/** Methods (HEAD left out) some route accepts on `path`; empty when no route has that path. */
export function allowedMethods(table: readonly RouteEntry[], path: string): string[] {
  return [...new Set(table.filter((r) => r.method !== 'HEAD' && r.pattern.test(path)).map((r) => r.method))];
}
