import { SbxError } from '../errors.js';

/** Signed worker token prefix and version (spec 5.2, DESIGN.md §3). */
export const WORKER_TOKEN_PREFIX = 'svc-worker-v1';
/** Audience of worker → control plane calls (heartbeat, lease renewal). */
export const AUD_CONTROL_PLANE = 'worker:control-plane';
/** Audience of control plane → worker RPC calls. */
export const AUD_RPC = 'worker:rpc';
/**
 * Audience of replica → replica RPC calls (DESIGN.md §7): signed with the installation's own key
 * from the store, accepted by a replica's `/rpc` and nowhere else.
 */
export const AUD_REPLICA_RPC = 'replica:rpc';
/** Longest accepted lifetime (exp - iat) of a signed token. */
export const MAX_TOKEN_LIFETIME_S = 15 * 60;
/** Clock skew tolerated on exp, nbf, iat and the lifetime cap. */
export const CLOCK_SKEW_S = 30;

export const WORKER_SCOPES = [
  'worker:heartbeat',
  'worker:spawn',
  'worker:destroy',
  'worker:status',
  'worker:exec',
  'worker:files',
  'worker:logs',
  'worker:lease',
] as const;
export type WorkerScope = (typeof WORKER_SCOPES)[number];

/** Claims inside a signed worker token; times are unix seconds. */
export interface WorkerTokenClaims {
  worker_id: string;
  jti: string;
  aud: string;
  scopes?: string[];
  iat?: number;
  nbf?: number;
  exp: number;
}

/** What a validated worker credential yields (spec 5.2). `expires` is null for static tokens. */
export interface WorkerIdentity {
  worker_id: string;
  scopes: WorkerScope[];
  expires: string | null;
  /** How the worker authenticated; never the credential itself. */
  via: 'shared_token' | 'worker_token' | 'signed_token';
}

export interface ClaimCheck {
  /** X-Worker-ID of the request. */
  worker_id: string;
  audience: string;
  now: Date;
  revoked: readonly string[];
}

const unauthorized = (message: string) => new SbxError('unauthorized', message);
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Only the known worker scopes survive; anything else is ignored (spec 5.2 rule 3). */
export function workerScopes(scopes: unknown): WorkerScope[] {
  if (!Array.isArray(scopes)) return [];
  const known = new Set<string>(WORKER_SCOPES);
  return [...new Set(scopes.filter((s): s is WorkerScope => typeof s === 'string' && known.has(s)))];
}

/**
 * Checks decoded claims against the request (spec 5.2 rules 1–6); the signature is checked by the
 * caller. Throws `unauthorized` with a reason that never carries the token.
 */
export function validateWorkerClaims(raw: unknown, check: ClaimCheck): WorkerIdentity {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw unauthorized('worker token claims are malformed');
  const c = raw as Record<string, unknown>;
  if (typeof c.worker_id !== 'string' || c.worker_id === '') throw unauthorized('worker token has no worker_id');
  if (typeof c.jti !== 'string' || c.jti === '') throw unauthorized('worker token has no jti');
  if (!isInt(c.exp)) throw unauthorized('worker token has no exp');
  for (const k of ['iat', 'nbf'] as const) {
    if (c[k] !== undefined && !isInt(c[k])) throw unauthorized(`worker token ${k} is not a number`);
  }
  if (c.worker_id !== check.worker_id) throw unauthorized('X-Worker-ID does not match the worker token');
  const aud = Array.isArray(c.aud) ? c.aud : [c.aud];
  if (!aud.includes(check.audience)) throw unauthorized(`worker token audience is not ${check.audience}`);
  if (check.revoked.includes(c.jti)) throw unauthorized('worker token has been revoked');

  const now = Math.floor(check.now.getTime() / 1000);
  const iat = c.iat as number | undefined;
  const nbf = c.nbf as number | undefined;
  if (now > c.exp + CLOCK_SKEW_S) throw unauthorized('worker token has expired');
  if (nbf !== undefined && now + CLOCK_SKEW_S < nbf) throw unauthorized('worker token is not valid yet');
  if (iat !== undefined) {
    if (now + CLOCK_SKEW_S < iat) throw unauthorized('worker token was issued in the future');
    if (c.exp - iat > MAX_TOKEN_LIFETIME_S + CLOCK_SKEW_S) throw unauthorized('worker token lifetime exceeds 15 minutes');
  }
  return {
    worker_id: c.worker_id,
    // No scopes claim = every worker scope; a listed set is taken as is, minus non-worker scopes.
    scopes: c.scopes === undefined ? [...WORKER_SCOPES] : workerScopes(c.scopes),
    expires: new Date(c.exp * 1000).toISOString(),
    via: 'signed_token',
  };
}

/** True when the identity may perform the scope's work. */
export function hasWorkerScope(identity: WorkerIdentity, scope: WorkerScope): boolean {
  return identity.scopes.includes(scope);
}
