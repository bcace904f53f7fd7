/**
 * The sibling transports the API listener serves besides its own routes (DESIGN.md §2: transports
 * never import each other, so the composition root mounts them): the dashboard (`/ui`), MCP over
 * HTTP (`/mcp`) and E2B's control and envd planes (`/e2b`, `/e2b/sandbox`, §14), each only when its setting is on.
 */
import type { FastifyInstance } from 'fastify';
import { envdRoutes } from '../transports/e2b/envd/routes.js';
import { e2bRoutes } from '../transports/e2b/routes.js';
import { callerOf } from '../transports/http/caller.js';
import type { HttpDeps } from '../transports/http/deps.js';
import { previewRouter } from '../transports/http/preview.js';
import { mcpRoutes } from '../transports/mcp/http.js';
import { uiRoutes } from '../transports/ui/route.js';

export type RouteGroup = (app: FastifyInstance, deps: HttpDeps) => void | Promise<void>;

export function mountedTransports(deps: HttpDeps): RouteGroup[] {
  const groups: RouteGroup[] = [];
  if (deps.ui) groups.push((app) => uiRoutes(app));
  if (deps.mcp) groups.push((app, d) => mcpRoutes(app, d));
  // E2B's control plane on the same services; the caller's owner by the API's own rule.
  if (deps.e2b !== false) {
    groups.push((app, d) => e2bRoutes(app, { ...d, installationSecret: d.listCursorSecret, callerOf: (request) => callerOf(request) }));
    // E2B's envd plane (§14): commands and files through the same services.
    groups.push((app, d) =>
      envdRoutes(app, {
        ...d,
        installationSecret: d.listCursorSecret,
        // E2B's watchDir over sbx's file watch (§16).
        watch: d.files.watcher,
        ...(d.inflight ? { budget: d.inflight } : {}),
        ...(d.preview ? { forwardPort: (req, res, id, port, path) => previewRouter(d).forward(req, res, id, port, path) } : {}),
        ...(d.preview ? { forwardUpgrade: (...a) => previewRouter(d).forwardUpgradeTo(...a) } : {}),
      }),
    );
  }
  return groups;
}
