import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { parseIdempotencyKey, requestHash } from '../../core/sandboxes/idempotency.js';
import type { SandboxRecord } from '../../core/ports/index.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import type { HttpDeps } from './deps.js';
import { presentOne, presentSandboxes } from './presenters.js';
import { abortOnClose } from '../shared/request-signal.js';

/** `Idempotency-Key` on the spawn routes (DESIGN.md §10). */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        'Retry-safe spawn: the same key from the same owner within 24 h answers the first sandbox again ' +
        '(header Idempotent-Replayed: true); with a different request → 409',
    }),
  ),
});

/** Header a replayed spawn answers with (DESIGN.md §10). */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/**
 * A spawn route's answer, idempotent when the request carries `Idempotency-Key`: the first request
 * spawns; a retry gets the same sandbox (201, `Idempotent-Replayed: true`).
 */
export async function spawnReply(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: HttpDeps,
  caller: Caller,
  route: string,
  spawn: (signal: AbortSignal) => Promise<SandboxRecord>,
): Promise<FastifyReply> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  const signal = abortOnClose(reply);
  if (key === undefined) return reply.code(201).send(await presentOne(deps, caller, await spawn(signal)));
  const { rec, replayed } = await deps.idempotency.run(caller.owner_id, key, requestHash(route, request.body), () => spawn(signal), signal);
  if (replayed) reply.header(REPLAYED_HEADER, 'true');
  return reply.code(201).send(await presentOne(deps, caller, rec));
}

/**
 * A fork's answer (DESIGN.md §16), idempotent like a spawn: the key keeps the first fork's id, and a
 * retry answers every fork of the first request again (201, `Idempotent-Replayed: true`).
 */
export async function forkReply(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: HttpDeps,
  caller: Caller,
  parentId: string,
  fork: (signal: AbortSignal) => Promise<SandboxRecord[]>,
): Promise<FastifyReply> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  const signal = abortOnClose(reply);
  if (key === undefined) return reply.code(201).send({ sandboxes: await presentSandboxes(deps, caller, await fork(signal)) });
  const { value, replayed } = await deps.idempotency.runFor(
    caller.owner_id,
    key,
    requestHash(`fork:${parentId}`, request.body),
    () => fork(signal),
    (recs) => recs[0]!.id,
    (id) => deps.sandboxes.forks.replay(id),
    signal,
  );
  if (replayed) reply.header(REPLAYED_HEADER, 'true');
  return reply.code(201).send({ sandboxes: await presentSandboxes(deps, caller, value) });
}
