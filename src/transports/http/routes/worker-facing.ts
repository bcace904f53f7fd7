import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { LeaseRenewRequest, LeaseRenewResponse, type LeaseRenewRequest as RenewBody } from '../../../contracts/admin.js';
import { ErrorBody } from '../../../contracts/common.js';
import {
  HeartbeatRequest,
  Worker,
  WorkerEventsRequest,
  WorkerEventsResponse,
  type HeartbeatRequest as HeartbeatBody,
  type WorkerEventsRequest as EventsBody,
} from '../../../contracts/system.js';
import { hasWorkerScope, type WorkerScope } from '../../../core/auth/worker-claims.js';
import { parseDuration } from '../../../core/duration.js';
import { SbxError, badRequest, conflict, notFound } from '../../../core/errors.js';
import { CONTROL_PLANE_LEASE } from '../../../core/replicas/replicas.js';
import { STALE_AFTER_MS } from '../../../core/scheduler/workers.js';
import type { HttpDeps } from '../deps.js';
import { presentWorker } from '../presenters.js';

const WorkerParams = Type.Object({ workerID: Type.String({ minLength: 1, maxLength: 128 }) });
const LeaseParams = Type.Object({
  workerID: Type.String({ minLength: 1, maxLength: 128 }),
  resourceID: Type.String({ minLength: 1, maxLength: 128 }),
});
const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };

/** The worker the auth plugin verified, holding `scope`; 403 when the token's scopes leave it out. */
function workerWith(request: FastifyRequest, scope: WorkerScope): string {
  const w = request.sbxWorker;
  if (!w) throw new SbxError('unauthorized', 'worker credentials are required');
  if (!hasWorkerScope(w, scope)) throw new SbxError('forbidden', `worker token lacks the ${scope} scope`);
  return w.worker_id;
}

/**
 * Worker → control plane routes (spec 4.6, 5.2). Worker credentials only — the auth plugin
 * verifies them and that X-Worker-ID equals the path worker ID before these handlers run.
 */
export function workerFacingRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['workers'];

  app.post<{ Params: { workerID: string }; Body: HeartbeatBody }>(
    '/api/v1/worker/:workerID/heartbeat',
    {
      schema: {
        tags,
        summary: 'Worker heartbeat (worker credentials)',
        params: WorkerParams,
        body: HeartbeatRequest,
        response: { 200: Worker, ...errors },
      },
    },
    async (request) => {
      const id = workerWith(request, 'worker:heartbeat');
      await deps.workers.refuseReplicaId(id, request.body);
      return presentWorker(await deps.workers.heartbeat(id, request.body), STALE_AFTER_MS, deps.clock.now());
    },
  );

  // DESIGN §10: the denials of a worker's egress gateway, in batches; the worker is the credential's.
  app.post<{ Body: EventsBody }>(
    '/api/v1/worker/events',
    {
      schema: {
        tags,
        summary: "Report events about this worker's sandboxes: egress denials (worker credentials)",
        body: WorkerEventsRequest,
        response: { 200: WorkerEventsResponse, ...errors },
      },
    },
    async (request) => {
      const id = workerWith(request, 'worker:heartbeat');
      await deps.workers.refuseReplicaId(id);
      return deps.workers.reportEvents(id, request.body.events);
    },
  );

  app.post<{ Params: { workerID: string; resourceID: string }; Body: RenewBody }>(
    '/api/v1/worker/:workerID/leases/:resourceID/renew',
    {
      schema: {
        tags,
        summary: 'Renew a lease the worker holds (worker credentials)',
        params: LeaseParams,
        body: LeaseRenewRequest,
        response: { 200: LeaseRenewResponse, ...errors },
      },
    },
    async (request) => {
      const id = workerWith(request, 'worker:lease');
      await deps.workers.refuseReplicaId(id);
      const ttlMs = parseDuration(request.body.ttl, 'ttl');
      if (ttlMs <= 0) throw badRequest('ttl must be positive');
      const { resourceID } = request.params;
      // Replica and leader leases are the control plane's: a worker never renews one, whatever its id.
      if (CONTROL_PLANE_LEASE.test(resourceID)) throw new SbxError('forbidden', `lease ${resourceID} belongs to the control plane`);
      const result = await deps.leases.renew(resourceID, id, ttlMs);
      if (result.ok) return { lease: result.lease };
      if (result.reason === 'not_found') throw notFound(`lease ${resourceID} not found`);
      throw conflict(result.reason === 'expired' ? `lease ${resourceID} has expired` : `lease ${resourceID} is held by another worker`);
    },
  );
}
