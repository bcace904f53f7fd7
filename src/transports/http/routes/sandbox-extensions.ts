/**
 * sbx's extensions of a sandbox: fork, pause and resume (DESIGN.md §16), its egress lists (§10). The spec's
 * lifecycle routes are in sandboxes.ts.
 */
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import {
  EgressUpdateRequest,
  type EgressUpdateRequest as EgressBody,
  ForkRequest,
  ForkResponse,
  type ForkRequest as ForkBody,
  Sandbox,
} from '../../../contracts/sandboxes.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { forkReply, IdempotencyHeaders } from '../idempotent.js';
import { presentOne } from '../presenters.js';
import { errors, IdParams } from './sandboxes.js';

export function sandboxExtensionRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.post<{ Params: { id: string }; Body: ForkBody | undefined }>(
    '/api/v1/sandboxes/:id/fork',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Fork a sandbox: new sandboxes with a copy of its filesystem',
        description:
          'sbx extension (DESIGN.md §16): `count` (1–10) new sandboxes with the same owner, provider, shape, ' +
          'network, egress rules and volumes, on the same node, each starting from a copy of the filesystem at this ' +
          'moment (running processes are not carried). TTL the given one or the server default; metadata the given one ' +
          "or the parent's. Admission applies to each fork, all or nothing (429 and none made). Each fork emits " +
          '`sandbox.created` with `forked_from` and shows `forked_from`. `Idempotency-Key` as on spawn. 501 for pool ' +
          'sandboxes and providers that cannot fork.',
        params: IdParams,
        headers: IdempotencyHeaders,
        body: ForkRequest,
        response: { 201: ForkResponse, ...errors, 409: ErrorBody, 501: ErrorBody },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const { id } = request.params;
      return forkReply(request, reply, deps, caller, id, (signal) => deps.sandboxes.forks.fork(id, request.body ?? {}, caller, signal));
    },
  );

  app.post<{ Params: { id: string } }>(
    '/api/v1/sandboxes/:id/pause',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Pause a sandbox',
        description:
          'sbx extension (DESIGN.md §16): state `paused`, every process frozen, memory kept (docker: the ' +
          "engine's pause; mock and proot: the cgroup freezer). 409 while an exec or stream is in flight; 501 where the " +
          'provider cannot freeze and for pool sandboxes. The TTL keeps running. An exec, file, process call ' +
          'or WebSocket resumes it first.',
        params: IdParams,
        response: { 200: Sandbox, ...errors, 409: ErrorBody, 501: ErrorBody },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return presentOne(deps, caller, await deps.sandboxes.pauses.pause(caller, request.params.id));
    },
  );

  app.post<{ Params: { id: string } }>(
    '/api/v1/sandboxes/:id/resume',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Resume a paused sandbox',
        description:
          'sbx extension (DESIGN.md §16): state `running` again; a running sandbox answers as is. With ' +
          '`on_expire: pause` it gets a fresh TTL.',
        params: IdParams,
        response: { 200: Sandbox, ...errors, 501: ErrorBody },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return presentOne(deps, caller, await deps.sandboxes.pauses.resume(caller, request.params.id));
    },
  );

  app.put<{ Params: { id: string }; Body: EgressBody }>(
    '/api/v1/sandboxes/:id/egress',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Replace the egress rules of a filtered sandbox',
        description:
          'sbx extension (DESIGN.md §10): replaces both lists (an absent list is empty); applies to new ' +
          'connections at once and closes open ones the new lists no longer allow. 409 when the sandbox is not filtered.',
        params: IdParams,
        body: EgressUpdateRequest,
        response: { 200: Sandbox, ...errors, 409: ErrorBody },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return presentOne(deps, caller, await deps.sandboxes.updateEgress(request.params.id, request.body, caller));
    },
  );
}
