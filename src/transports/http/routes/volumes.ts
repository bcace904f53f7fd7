import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import { CreateVolumeRequest, Volume } from '../../../contracts/volumes.js';
import type { VolumeView } from '../../../core/sandboxes/volumes.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { abortOnClose } from '../../shared/request-signal.js';

const errors = { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 500: ErrorBody, 501: ErrorBody, 503: ErrorBody };
const NameParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 256 }) });

function presentVolume(v: VolumeView): Volume {
  return { name: v.name, provider: v.provider, size_bytes: v.size_bytes, created_at: v.created_at };
}

/** DESIGN.md §10: named volumes that sandboxes mount read-write; kept until deleted. */
export function volumeRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['volumes'];
  const volumes = deps.sandboxes.volumes;

  app.post<{ Body: CreateVolumeRequest }>(
    '/api/v1/volumes',
    { schema: { tags, summary: 'Create a volume (sbx extension)', body: CreateVolumeRequest, response: { 201: Volume, ...errors } } },
    async (request, reply) => {
      const rec = await volumes.create(request.body.name, request.body.provider, callerOf(request), abortOnClose(reply));
      return reply.code(201).send(presentVolume(rec));
    },
  );

  app.get(
    '/api/v1/volumes',
    { schema: { tags, summary: 'Volumes, sorted by name (sbx extension)', response: { 200: Type.Array(Volume), ...errors } } },
    async (request, reply) => (await volumes.list(callerOf(request), abortOnClose(reply))).map(presentVolume),
  );

  app.delete<{ Params: { name: string } }>(
    '/api/v1/volumes/:name',
    {
      schema: {
        tags,
        summary: 'Delete a volume; 409 while a sandbox mounts it (sbx extension)',
        params: NameParams,
        response: { 200: StatusBody('deleted'), ...errors },
      },
    },
    async (request) => {
      await volumes.remove(request.params.name, callerOf(request));
      return { status: 'deleted' as const };
    },
  );
}
