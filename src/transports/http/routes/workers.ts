import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { Worker } from '../../../contracts/system.js';
import { STALE_AFTER_MS } from '../../../core/scheduler/workers.js';
import type { HttpDeps } from '../deps.js';
import { presentWorker } from '../presenters.js';

/** Read side of the worker registry (spec 4.6). */
export function workerRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['workers'];
  const present = (w: Parameters<typeof presentWorker>[0]) => presentWorker(w, STALE_AFTER_MS, deps.clock.now());

  app.get('/api/v1/workers', { schema: { tags, summary: 'List workers', response: { 200: Type.Array(Worker) } } }, async () =>
    (await deps.workers.list()).map(present),
  );

  app.get<{ Params: { workerID: string } }>(
    '/api/v1/workers/:workerID',
    {
      schema: {
        tags,
        summary: 'Get a worker',
        params: Type.Object({ workerID: Type.String() }),
        response: { 200: Worker, 404: ErrorBody },
      },
    },
    async (request) => present(await deps.workers.get(request.params.workerID)),
  );
}
