/**
 * Which credential a path needs (DESIGN.md §3 "Auth", §7): the probes are open, `/api/v1/worker/…`
 * takes worker credentials only, `/api/v1/admin/…` an admin credential, every other `/api/v1`
 * path, `/mcp` and `/e2b` an API key (when auth is enabled), and a replica's `/rpc` a `replica:rpc` token
 * (checked by the RPC routes themselves, before anything is read), and E2B's envd plane `/e2b/sandbox`
 * the sandbox's envd access token (checked by the envd handler per call). Other paths are not the API's:
 * only the dashboard's static files live there.
 */
export type Realm = 'probe' | 'user' | 'admin' | 'worker' | 'rpc' | 'envd' | 'outside';

const PROBES = new Set(['/api/v1/live', '/api/v1/ready']);

/**
 * The authenticated realms by path prefix, most specific first: a path is in the first realm whose
 * prefix it equals or continues with `/`. The realm test walks this list, so a new realm (`/e2b`)
 * is one line here.
 */
export const REALM_PREFIXES: ReadonlyArray<{ prefix: string; realm: Exclude<Realm, 'probe' | 'outside'> }> = [
  { prefix: '/api/v1/worker', realm: 'worker' },
  { prefix: '/api/v1/admin', realm: 'admin' },
  { prefix: '/api/v1', realm: 'user' },
  // MCP over HTTP (issue 19) acts as the caller: the same key as the API.
  { prefix: '/mcp', realm: 'user' },
  // E2B's envd plane (DESIGN.md §14): no API key, the sandbox's envd access token (checked per call).
  { prefix: '/e2b/sandbox', realm: 'envd' },
  // E2B's control plane (DESIGN.md §14) takes the same API keys.
  { prefix: '/e2b', realm: 'user' },
  // Replicas' worker RPC (DESIGN §7): replica tokens only.
  { prefix: '/rpc', realm: 'rpc' },
];

/** Realm of a route pattern or a request path (query string already removed). */
export function realmOf(path: string): Realm {
  if (PROBES.has(path)) return 'probe';
  for (const { prefix, realm } of REALM_PREFIXES) if (path === prefix || path.startsWith(`${prefix}/`)) return realm;
  return 'outside';
}
