import { randomBytes } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  E2bNetworkUpdate,
  E2bNewVolume,
  E2bSnapshotBody,
  E2bSnapshotInfo,
  E2bSnapshotsQuery,
  E2bVolume,
  E2bVolumeAndToken,
  type E2bNetworkUpdate as NetworkUpdate,
  type E2bSnapshotBody as SnapshotBody,
  type E2bSnapshotsQuery as SnapshotsQuery,
} from '../../contracts/e2b-catalog.js';
import { E2B_NEXT_TOKEN_HEADER } from '../../contracts/e2b.js';
import { badRequest, SbxError } from '../../core/errors.js';
import type { SnapshotRecord } from '../../core/ports/index.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import { abortOnClose } from '../shared/request-signal.js';
import type { E2bDeps } from './deps.js';
import { domainFor } from './mapping.js';
import { egressUpdateOf } from './network.js';

const hide = true;
const IdParams = Type.Object({ sandboxID: Type.String({ minLength: 1, maxLength: 128 }) });
const TemplateParams = Type.Object({ templateID: Type.String({ minLength: 1, maxLength: 256 }) });
const VolumeParams = Type.Object({ volumeID: Type.String({ minLength: 1, maxLength: 256 }) });

function isNotFound(err: unknown): boolean {
  return err instanceof SbxError && err.code === 'not_found';
}

/** Whether a create's `templateID` names a snapshot the caller sees (an sbx template of that name wins). */
export async function isSnapshot(deps: E2bDeps, name: string, caller: Caller): Promise<boolean> {
  try {
    await deps.templates.get(name);
    return false;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    await deps.sandboxes.snapshots.get(name, caller);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

function snapshotInfo(rec: SnapshotRecord): { snapshotID: string; names: string[] } {
  return { snapshotID: rec.name, names: [rec.name] };
}

/**
 * E2B's snapshots, volumes and network update over sbx's own (DESIGN.md §10): `createSnapshot` →
 * an sbx snapshot (its name is the id a create names as `templateID`), `listSnapshots`,
 * `deleteSnapshot` (E2B deletes the snapshot's template); `Volume` create/get/list/destroy → sbx
 * volumes (no volume content API: its calls answer 501); `updateNetwork` → the egress lists.
 */
export function e2bCatalogRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  snapshotRoutes(scope, deps);
  volumeRoutes(scope, deps);
  scope.put<{ Params: { sandboxID: string }; Body: NetworkUpdate }>(
    '/sandboxes/:sandboxID/network',
    { schema: { hide, params: IdParams, body: E2bNetworkUpdate } },
    async (request, reply) => {
      const caller = deps.callerOf(request);
      await deps.sandboxes.get(request.params.sandboxID, caller);
      const lists = await egressUpdateOf(deps, caller, request.body);
      await deps.sandboxes.updateEgress(request.params.sandboxID, lists, caller);
      return reply.code(204).send();
    },
  );
}

function snapshotRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  // E2B names a snapshot when the caller does not: sbx needs a name, so one is made.
  scope.post<{ Params: { sandboxID: string }; Body: SnapshotBody | undefined }>(
    '/sandboxes/:sandboxID/snapshots',
    { schema: { hide, params: IdParams, body: Type.Optional(E2bSnapshotBody), response: { 201: E2bSnapshotInfo } } },
    async (request, reply) => {
      const name = request.body?.name ?? `snapshot-${randomBytes(6).toString('hex')}`;
      const rec = await deps.sandboxes.snapshots.create(request.params.sandboxID, name, deps.callerOf(request), abortOnClose(reply));
      return reply.code(201).send(snapshotInfo(rec));
    },
  );

  // Sorted by name; `nextToken` is the last name of the page before (names are no secret to who sees them).
  scope.get<{ Querystring: SnapshotsQuery }>(
    '/snapshots',
    { schema: { hide, querystring: E2bSnapshotsQuery, response: { 200: Type.Array(E2bSnapshotInfo) } } },
    async (request, reply) => {
      const q = request.query;
      const all = (await deps.sandboxes.snapshots.list(deps.callerOf(request))).filter(
        (s) =>
          (q.sandboxID === undefined || s.sandbox_id === q.sandboxID) &&
          (q.name === undefined || s.name === q.name) &&
          (q.nextToken === undefined || s.name > q.nextToken),
      );
      const limit = q.limit ?? 100;
      const page = all.slice(0, limit);
      if (all.length > limit) reply.header(E2B_NEXT_TOKEN_HEADER, page[page.length - 1]!.name);
      return page.map(snapshotInfo);
    },
  );

  // The SDK's deleteSnapshot deletes the snapshot's template: a snapshot here; an sbx template is not deleted through /e2b.
  scope.delete<{ Params: { templateID: string } }>(
    '/templates/:templateID',
    { schema: { hide, params: TemplateParams } },
    async (request, reply) => {
      const caller = deps.callerOf(request);
      const name = request.params.templateID;
      if (!(await isSnapshot(deps, name, caller))) {
        const template = await deps.templates.get(name).catch((err: unknown) => {
          if (isNotFound(err)) return null;
          throw err;
        });
        if (template) throw badRequest(`deleting templates is not supported through /e2b: ${name} is an sbx template`);
        throw new SbxError('not_found', `snapshot ${name} not found`);
      }
      await deps.sandboxes.snapshots.remove(name, caller, abortOnClose(reply));
      return reply.code(204).send();
    },
  );
}

function volumeRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  const withToken = (request: Parameters<typeof domainFor>[1], name: string) => ({
    volumeID: name,
    name,
    token: '',
    domain: domainFor(deps, request),
  });
  scope.post<{ Body: { name: string } }>(
    '/volumes',
    { schema: { hide, body: E2bNewVolume, response: { 201: E2bVolumeAndToken } } },
    async (request, reply) => {
      const rec = await deps.sandboxes.volumes.create(request.body.name, undefined, deps.callerOf(request), abortOnClose(reply));
      return reply.code(201).send(withToken(request, rec.name));
    },
  );
  scope.get('/volumes', { schema: { hide, response: { 200: Type.Array(E2bVolume) } } }, async (request, reply) =>
    (await deps.sandboxes.volumes.list(deps.callerOf(request), abortOnClose(reply))).map((v) => ({ volumeID: v.name, name: v.name })),
  );
  scope.get<{ Params: { volumeID: string } }>(
    '/volumes/:volumeID',
    { schema: { hide, params: VolumeParams, response: { 200: E2bVolumeAndToken } } },
    async (request) => withToken(request, (await deps.sandboxes.volumes.get(request.params.volumeID, deps.callerOf(request))).name),
  );
  scope.delete<{ Params: { volumeID: string } }>(
    '/volumes/:volumeID',
    { schema: { hide, params: VolumeParams } },
    async (request, reply) => {
      await deps.sandboxes.volumes.remove(request.params.volumeID, deps.callerOf(request), abortOnClose(reply));
      return reply.code(204).send();
    },
  );
  // E2B's volume content API (a volume's files without a sandbox): sbx has none; mount the volume in a sandbox.
  scope.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    url: '/volumecontent/*',
    schema: { hide },
    handler: async () => {
      throw new SbxError('not_implemented', 'volume content is not served by this server: mount the volume in a sandbox and use its files');
    },
  });
}
