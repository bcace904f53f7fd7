import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { EnvdDeps } from './deps.js';
import { envdHandler, envdUpgradeHandler } from './server.js';
import { ENVD_PREFIX } from './target.js';

/**
 * Mounts the envd plane (DESIGN.md §14) at `/e2b/sandbox/*` on the API listener, after the app's
 * onRequest plugins (dev-box guard, rate limit; the `envd` realm takes no API key: the access
 * token is checked per call). Bodies are left unread here: Connect, `/files` and forwarded ports
 * stream them themselves, so the route hands the raw request on.
 */
export function envdRoutes(app: FastifyInstance, deps: EnvdDeps): void {
  const handle = envdHandler(deps);
  // Upgrades under the prefix (a WebSocket to a sandbox port) are taken before the app's WebSocket routes see them.
  const upgrade = envdUpgradeHandler(deps);
  const server = app.server;
  const emit = server.emit.bind(server) as (event: string, ...args: unknown[]) => boolean;
  server.emit = ((event: string, ...args: unknown[]): boolean => {
    const req = args[0] as IncomingMessage;
    if (event === 'upgrade' && (req.url ?? '').startsWith(`${ENVD_PREFIX}/`)) {
      upgrade(req, args[1] as Socket, args[2] as Buffer);
      return true;
    }
    return emit(event, ...args);
  }) as typeof server.emit;
  void app.register((scope, _opts, done) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, next) => next(null, undefined));
    scope.route({
      method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
      url: `${ENVD_PREFIX}/*`,
      schema: { hide: true },
      handler: (request, reply) => {
        reply.hijack();
        handle(request.raw, reply.raw);
      },
    });
    done();
  });
}
