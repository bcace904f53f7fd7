import { accessTokenMatches, accessTokenOf } from '../../../core/auth/access-token.js';
import { notFound, SbxError } from '../../../core/errors.js';
import type { SandboxRecord } from '../../../core/ports/index.js';
import type { Caller } from '../../../core/sandboxes/caller.js';
import type { EnvdDeps } from './deps.js';

export { ENVD_PORT, ENVD_PREFIX, SANDBOX_ID_HEADER, SANDBOX_PORT_HEADER } from '../../shared/envd-routing.js';
export const ACCESS_TOKEN_HEADER = 'x-access-token';

/** The sandbox an envd call acts on, and the caller it acts as (the sandbox's owner). */
export interface EnvdTarget {
  rec: SandboxRecord;
  caller: Caller;
}

const LOOKUP: Caller = { owner_id: null, admin: true };

/**
 * Resolves and authorizes one envd call (DESIGN.md §14 "Auth"). The envd plane carries no API key:
 * the sandbox's envd access token in `X-Access-Token` (or a `/files` signature made from it) is
 * the credential, compared in constant time, required whenever the sandbox has one. A sandbox
 * without one is reachable here only while auth, ownership and pool mode are all off (else it was
 * made through the native API and this plane must not open it). The call then acts as the
 * sandbox's owner, so core's ownership rules hold as on the native API.
 * Unknown, destroyed or expired sandbox → not_found; wrong or missing token → unauthorized.
 */
export async function resolveTarget(
  deps: EnvdDeps,
  sandboxId: string | null,
  token: string | undefined,
  signed?: (token: string) => boolean,
): Promise<EnvdTarget> {
  if (!sandboxId) throw new SbxError('bad_request', 'the E2b-Sandbox-Id header is required');
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(sandboxId)) throw notFound(`sandbox ${JSON.stringify(sandboxId.slice(0, 64))} not found`);
  const rec = await deps.sandboxes.get(sandboxId, LOOKUP);
  const seed = rec.access_token_seed;
  if (seed) {
    const ok = token !== undefined && accessTokenMatches(deps.installationSecret, rec.id, seed, token);
    if (!ok && !(signed && signedBy(deps, rec, signed)))
      throw new SbxError('unauthorized', 'missing or wrong envd access token (X-Access-Token)');
  } else if (deps.auth.enabled || deps.settings.enforce_ownership || deps.settings.pool.enabled) {
    throw new SbxError('unauthorized', `sandbox ${rec.id} has no envd access token: create it through /e2b to reach it here`);
  }
  const caller: Caller = { owner_id: rec.owner_id ?? null, admin: false };
  await deps.wake?.(rec, caller);
  return { rec, caller };
}

/** A `/files` signature check: it recomputes the hash from the sandbox's token (derived, never stored). */
function signedBy(deps: EnvdDeps, rec: SandboxRecord, signed: (token: string) => boolean): boolean {
  return signed(accessTokenOf(deps.installationSecret, rec.id, rec.access_token_seed ?? ''));
}
