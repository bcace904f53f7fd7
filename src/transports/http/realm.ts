/**
 * Which credential a path needs (DESIGN.md §3 "Auth"): the probes are open, `/api/v1/worker/…`
 * takes worker credentials only, `/api/v1/admin/…` an admin credential, every other `/api/v1`
 * path and `/mcp` an API key (when auth is enabled). Other paths outside `/api/v1` are not the API's.
 */
export type Realm = 'probe' | 'user' | 'admin' | 'worker' | 'outside';

const PROBES = new Set(['/api/v1/live', '/api/v1/ready']);

/** Realm of a route pattern or a request path (query string already removed). */
export function realmOf(path: string): Realm {
  if (PROBES.has(path)) return 'probe';
  if (path === '/api/v1/worker' || path.startsWith('/api/v1/worker/')) return 'worker';
  if (path === '/api/v1/admin' || path.startsWith('/api/v1/admin/')) return 'admin';
  if (path === '/api/v1' || path.startsWith('/api/v1/')) return 'user';
  // MCP over HTTP (issue 19) acts as the caller: the same key as the API.
  if (path === '/mcp') return 'user';
  // E2B's control plane (DESIGN.md §14) takes the same API keys.
  if (path === '/e2b' || path.startsWith('/e2b/')) return 'user';
  return 'outside';
}
