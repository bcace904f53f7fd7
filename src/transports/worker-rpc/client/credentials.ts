/**
 * Which credential the control plane presents to a worker's RPC (spec 5.2, DESIGN.md §7): the
 * worker's own `auth.worker_tokens.<id>` entry; else, with a signing key, a token minted for this
 * one call (audience `worker:rpc`, this worker, every worker scope, 5 minutes); else the shared
 * `auth.worker_token`. The value never reaches a log or an error.
 */
import { randomBytes } from 'node:crypto';
import type { WorkerCredentials } from '../../../core/auth/settings.js';
import { AUD_REPLICA_RPC, AUD_RPC, WORKER_SCOPES } from '../../../core/auth/worker-claims.js';
import { signWorkerClaims } from '../../../core/auth/worker-credentials.js';

/** Lifetime of a minted RPC token. */
const MINTED_TTL_S = 5 * 60;

/** The token to present to `workerId`, or null when this control plane has none for it. */
export function rpcToken(creds: WorkerCredentials, workerId: string, now: Date): string | null {
  if (Object.hasOwn(creds.tokens, workerId) && creds.tokens[workerId]) return creds.tokens[workerId]!;
  const key = creds.signing_keys[0];
  if (key) {
    const iat = Math.floor(now.getTime() / 1000);
    return signWorkerClaims(key, {
      worker_id: workerId,
      jti: randomBytes(12).toString('hex'),
      aud: AUD_RPC,
      scopes: [...WORKER_SCOPES],
      iat,
      exp: iat + MINTED_TTL_S,
    });
  }
  return creds.shared_token !== '' ? creds.shared_token : null;
}

/** True when rpcToken would give a credential for this worker. */
export function hasRpcCredential(creds: WorkerCredentials, workerId: string): boolean {
  return Boolean((Object.hasOwn(creds.tokens, workerId) && creds.tokens[workerId]) || creds.signing_keys[0] || creds.shared_token);
}

/**
 * A replica → replica token (DESIGN.md §7): audience `replica:rpc`, the target replica's id, every
 * worker scope, 5 minutes, signed with the installation key from the store. Only a replica's `/rpc`
 * accepts one; an `sbx worker`, the worker routes and the user API refuse it.
 */
export function replicaToken(installationKey: string, replicaId: string, now: Date): string {
  const iat = Math.floor(now.getTime() / 1000);
  return signWorkerClaims(installationKey, {
    worker_id: replicaId,
    jti: randomBytes(12).toString('hex'),
    aud: AUD_REPLICA_RPC,
    scopes: [...WORKER_SCOPES],
    iat,
    exp: iat + MINTED_TTL_S,
  });
}
