import type { FastifyInstance } from 'fastify';

/**
 * E2B's wire shape for every error under `/e2b` (DESIGN.md §14): `{code: <HTTP status>, message}`.
 * Errors are raised and worded by the app's one error path (auth, guard, rate limit, validation,
 * core's SbxError); this hook, in the `/e2b` scope only, rewrites the finished body's string code
 * into the status E2B's SDK switches on (`code === 404` → its not-found error).
 */
export function e2bErrorShape(scope: FastifyInstance): void {
  scope.addHook('onSend', async (_request, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
    let body: unknown;
    try {
      body = JSON.parse(payload);
    } catch {
      return payload;
    }
    const message = (body as { message?: unknown } | null)?.message;
    if (typeof message !== 'string') return payload;
    reply.type('application/json; charset=utf-8');
    return JSON.stringify({ code: reply.statusCode, message });
  });
  scope.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    return reply
      .code(404)
      .type('application/json; charset=utf-8')
      .send({ code: 404, message: `no route for ${request.method} ${path}` });
  });
}
