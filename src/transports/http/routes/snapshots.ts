import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import { SnapshotSummary } from '../../../contracts/system.js';
import { CreateSnapshotRequest } from '../../../contracts/volumes.js';
import type { SnapshotRecord } from '../../../core/ports/index.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { abortOnClose } from '../../shared/request-signal.js';

const errors = { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 500: ErrorBody, 501: ErrorBody, 503: ErrorBody };
const NameParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 256 }) });
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });

/** Snapshot summary (DESIGN.md §3): `{name, image, kernel, size_bytes, created_at, provider}`. */
export function presentSnapshot(s: SnapshotRecord): Static<typeof SnapshotSummary> {
  return { name: s.name, image: s.image, kernel: s.kernel, size_bytes: s.size_bytes, created_at: s.created_at, provider: s.provider };
}

/** Spec 4.7 and DESIGN.md §10: snapshots of running sandboxes, kept until deleted. */
export function snapshotRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['snapshots'];
  const snapshots = deps.sandboxes.snapshots;

  app.post<{ Params: { id: string }; Body: CreateSnapshotRequest }>(
    '/api/v1/sandboxes/:id/snapshot',
    {
      schema: {
        tags,
        summary: 'Snapshot a running sandbox (sbx extension)',
        params: IdParams,
        body: CreateSnapshotRequest,
        response: { 201: SnapshotSummary, ...errors },
      },
    },
    async (request, reply) => {
      const rec = await snapshots.create(request.params.id, request.body.name, callerOf(request), abortOnClose(reply));
      return reply.code(201).send(presentSnapshot(rec));
    },
  );

  app.get(
    '/api/v1/snapshots',
    { schema: { tags, summary: 'Snapshot summaries, sorted by name', response: { 200: Type.Array(SnapshotSummary), ...errors } } },
    async (request) => (await snapshots.list(callerOf(request))).map(presentSnapshot),
  );

  app.get<{ Params: { name: string } }>(
    '/api/v1/snapshots/:name',
    { schema: { tags, summary: 'One snapshot (sbx extension)', params: NameParams, response: { 200: SnapshotSummary, ...errors } } },
    async (request) => presentSnapshot(await snapshots.get(request.params.name, callerOf(request))),
  );

  app.delete<{ Params: { name: string } }>(
    '/api/v1/snapshots/:name',
    {
      schema: {
        tags,
        summary: 'Delete a snapshot (sbx extension)',
        params: NameParams,
        response: { 200: StatusBody('deleted'), ...errors },
      },
    },
    async (request) => {
      await snapshots.remove(request.params.name, callerOf(request));
      return { status: 'deleted' as const };
    },
  );
}
