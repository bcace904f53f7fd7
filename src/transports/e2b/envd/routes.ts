import type { FastifyInstance } from 'fastify';
import type { EnvdDeps } from './deps.js';
import { envdHandler } from './server.js';
import { ENVD_PREFIX } from './target.js';

/**
 * Mounts the envd plane (DESIGN.md §14) at `/e2b/sandbox/*` on the API listener, after the app's
 * onRequest plugins (dev-box guard, rate limit; the `envd` realm takes no API key: the access
 * token is checked per call). Bodies are left unread here: Connect, `/files` and forwarded ports
 * stream them themselves, so the route hands the raw request on.
 */
export function envdRoutes(app: FastifyInstance, deps: EnvdDeps): void {
  const handle = envdHandler(deps);
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
