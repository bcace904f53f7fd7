import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  E2bConnectBody,
  E2bMetricsQuery,
  E2bNewSandbox,
  E2bPauseBody,
  E2bRefreshBody,
  E2bResumeBody,
  E2bSandbox,
  E2bSandboxDetail,
  E2bSandboxMetric,
  E2bTimeoutBody,
  type E2bNewSandbox as NewSandbox,
} from '../../contracts/e2b.js';
import { conflict } from '../../core/errors.js';
import type { SandboxRecord } from '../../core/ports/index.js';
import { abortOnClose } from '../shared/request-signal.js';
import type { E2bDeps } from './deps.js';
import { e2bCatalogRoutes, isSnapshot } from './catalog.js';
import { e2bListRoutes } from './list.js';
import { presentDetail, presentE2bSandbox, spawnInputOf, templateOf } from './mapping.js';
import { e2bErrorShape } from './scope.js';
import { e2bSecretRoutes } from './secrets.js';

/** The prefix E2B's SDK is pointed at: `E2B_API_URL=http://HOST:PORT/e2b`. */
export const E2B_PREFIX = '/e2b';

const IdParams = Type.Object({ sandboxID: Type.String({ minLength: 1, maxLength: 128 }) });
type Id = { Params: { sandboxID: string } };
// E2B's API has its own document; these routes stay out of sbx's OpenAPI.
const hide = true;

/**
 * E2B's control-plane REST API (DESIGN.md §14) under `/e2b`, on the same core services, plugins
 * (guard, auth, audit, rate limit, in-flight budget) and events as `/api/v1`: create (v1 and v2
 * paths), list (v1, v2), get, kill, timeout, refresh, connect (v1 and v2), pause, resume, metrics.
 */
export function e2bRoutes(app: FastifyInstance, deps: E2bDeps): void {
  void app.register(
    (scope, _opts, done) => {
      e2bErrorShape(scope);
      e2bListRoutes(scope, deps);
      lifecycleRoutes(scope, deps);
      timeRoutes(scope, deps);
      pauseRoutes(scope, deps);
      e2bCatalogRoutes(scope, deps);
      e2bSecretRoutes(scope, deps);
      done();
    },
    { prefix: E2B_PREFIX },
  );
}

function lifecycleRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  const create = async (request: FastifyRequest<{ Body: NewSandbox | undefined }>, reply: FastifyReply) => {
    const body = request.body ?? {};
    const caller = deps.callerOf(request);
    const input = await spawnInputOf(deps, body, caller);
    const template = templateOf(body);
    const signal = abortOnClose(reply);
    if (template === null) return presentE2bSandbox(deps, request, await deps.sandboxes.spawn(input, signal));
    // A templateID names an sbx template, else a snapshot taken through createSnapshot (DESIGN.md §10).
    if (await isSnapshot(deps, template, caller)) {
      return presentE2bSandbox(deps, request, await deps.sandboxes.spawn({ ...input, snapshot: template }, signal));
    }
    return presentE2bSandbox(deps, request, await deps.templates.spawn(template, input, signal));
  };
  for (const url of ['/sandboxes', '/v2/sandboxes']) {
    scope.post<{ Body: NewSandbox | undefined }>(
      url,
      { schema: { hide, body: E2bNewSandbox, response: { 201: E2bSandbox } } },
      async (request, reply) => reply.code(201).send(await create(request, reply)),
    );
  }

  scope.get<Id>('/sandboxes/:sandboxID', { schema: { hide, params: IdParams, response: { 200: E2bSandboxDetail } } }, async (request) =>
    presentDetail(deps, request, await deps.sandboxes.refresh(request.params.sandboxID, deps.callerOf(request)), deps.callerOf(request)),
  );

  // E2B answers 404 for a sandbox that is gone (the SDK's kill then returns false), 204 otherwise.
  scope.delete<Id>('/sandboxes/:sandboxID', { schema: { hide, params: IdParams } }, async (request, reply) => {
    const caller = deps.callerOf(request);
    await deps.sandboxes.get(request.params.sandboxID, caller);
    await deps.sandboxes.destroy(request.params.sandboxID, caller);
    return reply.code(204).send();
  });

  // No provider reports usage through the Provider port yet: an empty list, never made-up numbers.
  scope.get<Id>(
    '/sandboxes/:sandboxID/metrics',
    { schema: { hide, params: IdParams, querystring: E2bMetricsQuery, response: { 200: Type.Array(E2bSandboxMetric) } } },
    async (request) => {
      await deps.sandboxes.get(request.params.sandboxID, deps.callerOf(request));
      return [];
    },
  );
}

function timeRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  // The end moves to now + timeout, earlier or later (E2B's setTimeout); max TTL and quotas as native.
  scope.post<Id & { Body: { timeout: number } }>(
    '/sandboxes/:sandboxID/timeout',
    { schema: { hide, params: IdParams, body: E2bTimeoutBody } },
    async (request, reply) => {
      await deps.sandboxes.extend(request.params.sandboxID, `${request.body.timeout}s`, deps.callerOf(request));
      return reply.code(204).send();
    },
  );

  scope.post<Id & { Body: { duration?: number } }>(
    '/sandboxes/:sandboxID/refreshes',
    { schema: { hide, params: IdParams, body: E2bRefreshBody } },
    async (request, reply) => {
      await keepAlive(deps, request, request.body.duration ?? 0);
      return reply.code(204).send();
    },
  );

  // Connect: 200 with its Sandbox (and its envd token) living at least `timeout` seconds more; a
  // paused sandbox is resumed first and answers 201, as E2B's connect resumes one (DESIGN.md §16).
  for (const url of ['/sandboxes/:sandboxID/connect', '/v2/sandboxes/:sandboxID/connect']) {
    scope.post<Id & { Body: { timeout?: number } }>(
      url,
      { schema: { hide, params: IdParams, body: E2bConnectBody, response: { 200: E2bSandbox, 201: E2bSandbox } } },
      async (request, reply) => {
        const caller = deps.callerOf(request);
        const rec = await deps.sandboxes.get(request.params.sandboxID, caller);
        const resumed = rec.state === 'paused';
        if (resumed) await deps.sandboxes.pauses.resume(caller, rec.id);
        const live = await keepAlive(deps, request, request.body.timeout ?? 0);
        return reply.code(resumed ? 201 : 200).send(presentE2bSandbox(deps, request, live));
      },
    );
  }
}

function pauseRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  // Pause (DESIGN.md §16): 204; an already paused sandbox is E2B's 409.
  scope.post<Id>('/sandboxes/:sandboxID/pause', { schema: { hide, params: IdParams, body: E2bPauseBody } }, async (request, reply) => {
    const caller = deps.callerOf(request);
    const rec = await deps.sandboxes.get(request.params.sandboxID, caller);
    if (rec.state === 'paused') throw conflict(`sandbox ${rec.id} is already paused`);
    await deps.sandboxes.pauses.pause(caller, rec.id);
    return reply.code(204).send();
  });
  // Resume: 201 with the Sandbox, living at least `timeout` seconds more; a running one is E2B's 409.
  scope.post<Id & { Body: { timeout?: number } }>(
    '/sandboxes/:sandboxID/resume',
    { schema: { hide, params: IdParams, body: E2bResumeBody, response: { 201: E2bSandbox } } },
    async (request, reply) => {
      const caller = deps.callerOf(request);
      const rec = await deps.sandboxes.get(request.params.sandboxID, caller);
      if (rec.state !== 'paused') throw conflict(`sandbox ${rec.id} is already running`);
      await deps.sandboxes.pauses.resume(caller, rec.id);
      const live = await keepAlive(deps, request, request.body.timeout ?? 0);
      return reply.code(201).send(presentE2bSandbox(deps, request, live));
    },
  );
}

/** The sandbox, living at least `seconds` more from now (never shortened), as the caller sees it. */
async function keepAlive(deps: E2bDeps, request: FastifyRequest<Id>, seconds: number): Promise<SandboxRecord> {
  const caller = deps.callerOf(request);
  const rec = await deps.sandboxes.get(request.params.sandboxID, caller);
  const wanted = deps.clock.now().getTime() + seconds * 1000;
  if (seconds <= 0 || wanted <= Date.parse(rec.expires_at)) return rec;
  return deps.sandboxes.extend(rec.id, `${seconds}s`, caller);
}
