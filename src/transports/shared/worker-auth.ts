/**
 * Worker credentials over HTTP (spec 5.2): the id and token come from the request headers; the
 * checks themselves are core/auth/worker-credentials.ts, shared with a worker's RPC server.
 * mintWorkerToken fills in the defaults a caller (a worker, a test) leaves out: now and a random jti.
 */
import { randomBytes } from 'node:crypto';
import type { WorkerCredentials } from '../../core/auth/settings.js';
import { MAX_TOKEN_LIFETIME_S, type WorkerIdentity, type WorkerTokenClaims } from '../../core/auth/worker-claims.js';
import { checkWorkerCredential, signWorkerClaims } from '../../core/auth/worker-credentials.js';
import { SbxError } from '../../core/errors.js';

export { isSignedWorkerToken, safeEqual, verifyWorkerToken, type VerifyOptions } from '../../core/auth/worker-credentials.js';

/** Input of mintWorkerToken: omitted jti/iat/exp get a random id, now, and now + ttl. */
export interface MintClaims {
  worker_id: string;
  aud: string;
  scopes?: string[];
  jti?: string;
  iat?: number;
  nbf?: number;
  exp?: number;
}

/** Signs worker claims; default lifetime 5 minutes, never above the 15-minute cap. */
export function mintWorkerToken(key: string, claims: MintClaims, opts: { now?: Date; ttlSeconds?: number } = {}): string {
  if (key === '') throw new SbxError('internal', 'no worker signing key to mint a token with');
  const iat = claims.iat ?? Math.floor((opts.now ?? new Date()).getTime() / 1000);
  const ttl = Math.min(opts.ttlSeconds ?? 300, MAX_TOKEN_LIFETIME_S);
  const full: WorkerTokenClaims = {
    worker_id: claims.worker_id,
    jti: claims.jti ?? randomBytes(12).toString('hex'),
    aud: claims.aud,
    ...(claims.scopes ? { scopes: claims.scopes } : {}),
    iat,
    ...(claims.nbf !== undefined ? { nbf: claims.nbf } : {}),
    exp: claims.exp ?? iat + ttl,
  };
  return signWorkerClaims(key, full);
}

type Headers = Record<string, string | string[] | undefined>;

const header = (h: Headers, name: string): string => {
  const v = h[name];
  return (Array.isArray(v) ? v[0] : v)?.trim() ?? '';
};

/** X-Worker-Token, else `Authorization: Bearer <token>`. */
export function presentedWorkerToken(h: Headers): string {
  const direct = header(h, 'x-worker-token');
  if (direct !== '') return direct;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header(h, 'authorization'));
  return m ? m[1]! : '';
}

/** Authenticates a worker request from its headers (X-Worker-ID, X-Worker-Token or Bearer); throws `unauthorized`. */
export function authenticateWorker(h: Headers, creds: WorkerCredentials, audience: string, now: Date): WorkerIdentity {
  return checkWorkerCredential(header(h, 'x-worker-id'), presentedWorkerToken(h), creds, audience, now);
}
