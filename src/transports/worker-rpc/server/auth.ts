/**
 * Who may call a worker's RPC (spec 5.2, DESIGN.md §7): its own static token or a signed token with
 * audience `worker:rpc` naming this worker — checked by the same core code as the control plane's
 * worker routes. User and admin keys, `worker:control-plane` tokens and revoked ids are 401;
 * another worker id, a missing scope, or a lease that is foreign, expired, for another resource or
 * older than the newest generation seen (fencing) are 403.
 */
import { AUD_RPC, hasWorkerScope, type WorkerIdentity, type WorkerScope } from '../../../core/auth/worker-claims.js';
import { badRequest, SbxError } from '../../../core/errors.js';
import type { RpcLease } from '../../../contracts/worker-rpc.js';
import { authenticateWorker } from '../../http/worker-auth.js';
import type { RpcServerDeps } from './deps.js';

type Headers = Record<string, string | string[] | undefined>;

export function authenticateRpc(headers: Headers, deps: RpcServerDeps): WorkerIdentity {
  const identity = deps.authenticate
    ? deps.authenticate(headers)
    : authenticateWorker(headers, deps.credentials(), AUD_RPC, deps.clock.now());
  if (identity.worker_id !== deps.workerId) throw new SbxError('forbidden', `this is worker ${deps.workerId}, not ${identity.worker_id}`);
  return identity;
}

export function requireScope(identity: WorkerIdentity, scope: string): void {
  if (!hasWorkerScope(identity, scope as WorkerScope)) throw new SbxError('forbidden', `worker token lacks the ${scope} scope`);
}

/**
 * Checks the lease a mutating call carries (spec 4.11 rule 1) and records its generation; a
 * generation older than the newest seen for the resource is a stale owner (fencing).
 */
export function checkLease(lease: RpcLease | undefined, resourceId: string, deps: RpcServerDeps): RpcLease {
  if (!lease) throw badRequest('this method needs a lease');
  if (lease.holder_id !== deps.workerId) throw new SbxError('forbidden', `the lease is held by ${lease.holder_id}, not this worker`);
  if (lease.resource_id !== resourceId) throw new SbxError('forbidden', 'the lease is for another resource');
  const expires = Date.parse(lease.expires_at);
  if (!(expires > deps.clock.now().getTime())) throw new SbxError('forbidden', 'the lease has expired');
  if (!deps.state.observeGeneration(resourceId, lease.generation))
    throw new SbxError('forbidden', 'the lease generation is older than one this worker has seen');
  return lease;
}
