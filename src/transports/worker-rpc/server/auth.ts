/**
 * Who may call a worker's RPC (spec 5.2, DESIGN.md §7): its own static token or a signed token with
 * audience `worker:rpc` naming this worker — checked by the same core code as the control plane's
 * worker routes. User and admin keys, `worker:control-plane` tokens and revoked ids are 401;
 * another worker id or a missing scope are 403 (a lease's refusals are fencing.ts's).
 */
import { AUD_RPC, hasWorkerScope, type WorkerIdentity, type WorkerScope } from '../../../core/auth/worker-claims.js';
import { SbxError } from '../../../core/errors.js';
import { authenticateWorker } from '../../shared/worker-auth.js';
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
