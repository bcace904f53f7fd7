import type { FastifyInstance, FastifySchema } from 'fastify';
import type { Realm } from '../realm.js';
import type { HttpDeps } from '../deps.js';
import type { RouteEntry } from '../route-table.js';

type Json = Record<string, unknown>;

/** The routes the document describes: HEAD twins and hidden routes are left out. */
export function documentedRoutes(table: readonly RouteEntry[]): RouteEntry[] {
  // The replica RPC (DESIGN §7) is between replicas, not part of the API.
  return table.filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS' && !r.schema?.hide && r.realm !== 'rpc');
}

/** `/sandboxes/:id/files/*` → `/sandboxes/{id}/files/{wildcard}`. */
export function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{wildcard}');
}

/** Credential headers (spec Part 5) as OpenAPI security schemes. */
const SECURITY_SCHEMES = {
  ApiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: 'The API key; required on /api/v1 routes when auth.enabled is true',
  },
  AdminApiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Admin-API-Key',
    description:
      'The admin key (auth.admin_api_key). On admin routes X-API-Key equal to it is accepted too; with no ' +
      'admin key set, admin routes take auth.api_key unless auth.admin_fallback_enabled is false',
  },
  WorkerId: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Worker-ID',
    description: 'The worker ID; must equal the token subject and the path worker ID',
  },
  WorkerToken: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Worker-Token',
    description: 'A worker credential: shared or per-worker token, or a signed svc-worker-v1 token',
  },
  WorkerBearer: { type: 'http', scheme: 'bearer', description: 'A worker credential sent as Authorization: Bearer <token>' },
} as const;

type SecurityRequirement = Partial<Record<keyof typeof SECURITY_SCHEMES, []>>;

/**
 * What an operation needs, by the realm the auth plugin enforces (one source, `realmOf`): probes are
 * open, worker routes take worker credentials only, admin routes the admin key, every other route
 * the API key or an admin key. Alternatives are OR'ed; schemes in one requirement are AND'ed.
 */
const SECURITY: Record<Exclude<Realm, 'outside' | 'rpc' | 'envd'>, SecurityRequirement[]> = {
  probe: [],
  user: [{ ApiKey: [] }, { AdminApiKey: [] }],
  admin: [{ AdminApiKey: [] }],
  worker: [
    { WorkerId: [], WorkerToken: [] },
    { WorkerId: [], WorkerBearer: [] },
  ],
};

const REASONS: Record<string, string> = {
  '101': 'Switching Protocols',
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No Content',
  '400': 'Bad request',
  '401': 'Unauthorized',
  '403': 'Forbidden',
  '404': 'Not found',
  '405': 'Method not allowed',
  '408': 'Timeout',
  '409': 'Conflict',
  '413': 'Payload too large',
  '426': 'Upgrade required',
  '429': 'Resource limit',
  '500': 'Provider error',
  '503': 'Unavailable',
};

/**
 * Builds an OpenAPI 3.0.3 document from the route table: TypeBox schemas are JSON Schema, so
 * they are converted to the 3.0 dialect (const → enum, null unions → nullable, records →
 * additionalProperties), and schemas carrying `$id` become `components.schemas` references.
 */
export function buildOpenApi(table: readonly RouteEntry[], version: string): Json {
  const components: Record<string, Json> = {};
  const conv = (s: unknown) => convert(s, components);
  const paths: Record<string, Record<string, Json>> = {};
  const tags = new Set<string>();
  const routes = [...documentedRoutes(table)].sort((a, b) => (a.url === b.url ? cmp(a.method, b.method) : cmp(a.url, b.url)));
  for (const r of routes) {
    const path = openapiPath(r.url);
    const s = (r.schema ?? {}) as FastifySchema & Json;
    for (const t of s.tags ?? []) tags.add(t);
    const op: Json = { operationId: operationId(r.method, r.url) };
    if (s.tags?.length) op.tags = s.tags;
    if (s.summary) op.summary = s.summary;
    if (s.description) op.description = s.description;
    const parameters = [...params(s.params, 'path', conv), ...params(s.querystring, 'query', conv), ...params(s.headers, 'header', conv)];
    for (const name of [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!)) {
      if (!parameters.some((p) => p.in === 'path' && p.name === name))
        parameters.unshift({ name, in: 'path', required: true, schema: { type: 'string' } });
    }
    if (parameters.length) op.parameters = parameters;
    if (s.body) op.requestBody = { content: requestContent(s.body, conv) };
    op.responses = responses(s.response, conv);
    const realm = r.realm;
    if (realm !== 'outside' && realm !== 'rpc' && realm !== 'envd') op.security = SECURITY[realm];
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'sbx API',
      version,
      description: 'Self-hosted control plane for disposable execution sandboxes. Errors are {code, message}.',
    },
    servers: [{ url: '/' }],
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(components).sort(([a], [b]) => cmp(a, b))),
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

/** `GET /api/v1/openapi.json`: the document for every route in `table`, built once on first request. */
export function openapiRoutes(app: FastifyInstance, deps: HttpDeps, table: readonly RouteEntry[]): void {
  let doc: Json | undefined;
  app.get(
    '/api/v1/openapi.json',
    { schema: { tags: ['system'], summary: 'OpenAPI 3.0 description of this API' } },
    async (_request, reply) => {
      doc ??= buildOpenApi(table, deps.settings.version);
      return reply.type('application/json; charset=utf-8').send(JSON.stringify(doc));
    },
  );
}

function params(schema: unknown, where: 'path' | 'query' | 'header', conv: (s: unknown) => unknown): Json[] {
  if (!schema || typeof schema !== 'object') return [];
  const s = schema as Json;
  const props = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set((s.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, p]) => {
    const out: Json = { name, in: where, required: where === 'path' || required.has(name), schema: conv(p) };
    if (typeof p.description === 'string') out.description = p.description;
    return out;
  });
}

/** A body schema, or fastify's per-media-type form `{content: {'<type>': {schema}}}`. */
function requestContent(body: unknown, conv: (s: unknown) => unknown): Json {
  const content = (body as { content?: unknown }).content;
  if (!content || typeof content !== 'object') return { 'application/json': { schema: conv(body) } };
  const out: Json = {};
  for (const [type, media] of Object.entries(content as Record<string, Json>)) out[type] = { schema: conv(media.schema ?? {}) };
  return out;
}

function responses(response: unknown, conv: (s: unknown) => unknown): Json {
  const out: Json = {};
  for (const [code, raw] of Object.entries((response ?? {}) as Record<string, Json>)) {
    const key = /^\dxx$/i.test(code) ? code.toUpperCase() : code;
    const description = typeof raw.description === 'string' ? raw.description : (REASONS[key] ?? 'Response');
    if (Object.keys(raw).length === 1 && typeof raw.description === 'string') {
      // A response without a body (a WebSocket upgrade's 101).
      out[key] = { description };
    } else if (raw.content && typeof raw.content === 'object') {
      const content: Json = {};
      for (const [type, media] of Object.entries(raw.content as Record<string, Json>)) content[type] = { schema: conv(media.schema ?? {}) };
      out[key] = { description, content };
    } else {
      out[key] = { description: REASONS[key] ?? 'Response', content: { 'application/json': { schema: conv(raw) } } };
    }
  }
  if (Object.keys(out).length === 0) out['200'] = { description: 'OK' };
  return out;
}

function operationId(method: string, url: string): string {
  const words = url
    .replace(/^\/api\/v1\/?/, '')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return method.toLowerCase() + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

const DROP = new Set(['$id', '$schema', '$comment', 'examples', 'patternProperties', 'const', 'hide', 'tags', 'summary']);

/** JSON Schema (TypeBox) → OpenAPI 3.0 schema object; `$id` schemas are hoisted into `components`. */
function convert(schema: unknown, components: Record<string, Json>): unknown {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const s = schema as Json;
  if (typeof s.$id === 'string' && !s.$id.includes('/') && !s.$id.startsWith('#')) {
    const name = s.$id;
    if (!(name in components)) {
      components[name] = {}; // reserve first: a schema may refer to itself
      components[name] = convertBody(s, components);
    }
    return { $ref: `#/components/schemas/${name}` };
  }
  return convertBody(s, components);
}

function convertBody(s: Json, components: Record<string, Json>): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(s)) {
    if (DROP.has(k)) continue;
    if (k === 'properties' && v && typeof v === 'object') {
      out.properties = Object.fromEntries(Object.entries(v as Json).map(([name, p]) => [name, convert(p, components)]));
    } else if (k === 'items' || k === 'not' || (k === 'additionalProperties' && typeof v === 'object')) {
      out[k] = convert(v, components);
    } else if ((k === 'anyOf' || k === 'oneOf' || k === 'allOf') && Array.isArray(v)) {
      out[k] = v.map((x) => convert(x, components));
    } else {
      out[k] = v;
    }
  }
  if ('const' in s) out.enum = [s.const];
  if (Array.isArray(out.type)) {
    const types = (out.type as string[]).filter((t) => t !== 'null');
    if (types.length < (out.type as string[]).length) out.nullable = true;
    if (types.length === 1) out.type = types[0];
    else delete out.type;
  }
  if (out.type === 'null') {
    delete out.type;
    out.nullable = true;
  }
  if (s.patternProperties && typeof s.patternProperties === 'object') {
    const first = Object.values(s.patternProperties as Json)[0];
    out.additionalProperties = first === undefined ? true : convert(first, components);
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = out[key] as Json[] | undefined;
    if (!branches) continue;
    const nonNull = branches.filter((b) => !(b.nullable === true && Object.keys(b).length === 1));
    if (nonNull.length < branches.length) out.nullable = true;
    const single = nonNull.length === 1 && typeof nonNull[0]!.$ref !== 'string' ? nonNull[0] : undefined;
    if (single) {
      delete out[key];
      Object.assign(out, single, out.nullable ? { nullable: true } : {});
    } else if (nonNull.length > 0 && nonNull.every((b) => Array.isArray(b.enum) && b.type === nonNull[0]!.type)) {
      delete out[key];
      out.type = nonNull[0]!.type;
      out.enum = nonNull.flatMap((b) => b.enum as unknown[]);
    } else {
      out[key] = nonNull;
    }
  }
  return out;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
