import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { WorkerSandboxSecrets } from '../../../contracts/secrets.js';
import { hasWorkerScope } from '../../../core/auth/worker-claims.js';
import { SbxError } from '../../../core/errors.js';
import type { HttpDeps } from '../deps.js';

const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { 401: ErrorBody, 403: ErrorBody, 501: ErrorBody, 503: ErrorBody };

/** A loopback peer (127/8, ::1, IPv4-mapped 127/8): the only one that may fetch values without TLS. */
function loopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.replace(/^::ffff:/i, '');
  return a === '::1' || /^127\.\d+\.\d+\.\d+$/.test(a);
}

function overTls(request: FastifyRequest): boolean {
  return request.protocol === 'https' || (request.raw.socket as { encrypted?: boolean }).encrypted === true;
}

/**
 * DESIGN.md §15: a worker's egress gateway fetches the values of the secrets bound to a sandbox it
 * runs (worker credentials with the `worker:spawn` scope; a sandbox placed elsewhere, or whose lease
 * the worker does not hold → 403). Values cross only TLS, or a loopback connection; never cached.
 */
export function workerSecretRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.get<{ Params: { id: string } }>(
    '/api/v1/worker/sandboxes/:id/secrets',
    {
      schema: {
        tags: ['workers'],
        summary:
          'The bound secrets, with values, of a sandbox this worker runs, for its egress gateway (worker credentials; TLS unless loopback)',
        params: Params,
        response: { 200: WorkerSandboxSecrets, ...errors },
      },
    },
    async (request, reply) => {
      const w = request.sbxWorker;
      if (!w) throw new SbxError('unauthorized', 'worker credentials are required');
      if (!hasWorkerScope(w, 'worker:spawn')) throw new SbxError('forbidden', 'worker token lacks the worker:spawn scope');
      if (!overTls(request) && !loopback(request.socket.remoteAddress))
        throw new SbxError(
          'forbidden',
          'secret values are sent to workers only over TLS: ' +
            'serve the API over https (or a TLS proxy) and point worker.control_plane_url at it',
        );
      if (!deps.secretService) throw new SbxError('not_implemented', 'secrets are not available on this server');
      const bound = await deps.secretService.forWorker(request.params.id, w.worker_id);
      void reply.header('cache-control', 'no-store');
      return {
        secrets: bound.map((b) => ({
          name: b.name,
          placeholder: b.placeholder,
          value: b.value,
          hosts: b.hosts.map((h) => h.text),
          allow_plain_http: b.allowPlainHttp,
        })),
      };
    },
  );
}
