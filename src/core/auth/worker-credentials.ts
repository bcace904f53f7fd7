/**
 * Worker credential checks (spec 5.2, DESIGN.md §3), independent of any transport: shared and
 * per-worker tokens, and signed tokens `svc-worker-v1.<payload>.<signature>` where payload is
 * unpadded base64url JSON claims and signature is unpadded base64url HMAC-SHA256(key,
 * `svc-worker-v1.<payload>`). The HTTP worker routes (audience `worker:control-plane`) and a worker's
 * RPC server (`worker:rpc`) both call checkWorkerCredential after taking the id and token from
 * their own headers. node:crypto is used for hashing only; time comes in as `now`.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { SbxError } from '../errors.js';
import { workerAuthConfigured, type WorkerCredentials } from './settings.js';
import { WORKER_SCOPES, WORKER_TOKEN_PREFIX, validateWorkerClaims, type WorkerIdentity, type WorkerTokenClaims } from './worker-claims.js';

const unauthorized = (message: string) => new SbxError('unauthorized', message);

/** Constant-time equality of two secrets: compares sha256 digests so lengths do not leak. */
export function safeEqual(presented: string, expected: string): boolean {
  if (expected === '') return false;
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

const b64url = (buf: Buffer) => buf.toString('base64url');
const hmac = (key: string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/** The signed token for complete claims. */
export function signWorkerClaims(key: string, claims: WorkerTokenClaims): string {
  const payload = b64url(Buffer.from(JSON.stringify(claims), 'utf8'));
  const signed = `${WORKER_TOKEN_PREFIX}.${payload}`;
  return `${signed}.${b64url(hmac(key, signed))}`;
}

/** True when the string has the signed-token shape (it may still be invalid). */
export function isSignedWorkerToken(token: string): boolean {
  return token.startsWith(`${WORKER_TOKEN_PREFIX}.`);
}

export interface VerifyOptions {
  /** Accepted signing keys: the active one and the rotation keys. */
  keys: readonly string[];
  audience: string;
  /** X-Worker-ID of the request. */
  workerId: string;
  now: Date;
  revoked: readonly string[];
}

/** Verifies a signed worker token and its claims; throws `unauthorized`. */
export function verifyWorkerToken(token: string, opts: VerifyOptions): WorkerIdentity {
  const parts = token.split('.');
  // Strict unpadded base64url (43 chars = 32 bytes of HMAC) so one token has exactly one spelling.
  if (
    parts.length !== 3 ||
    parts[0] !== WORKER_TOKEN_PREFIX ||
    !/^[A-Za-z0-9_-]+$/.test(parts[1] ?? '') ||
    !/^[A-Za-z0-9_-]{43}$/.test(parts[2] ?? '')
  ) {
    throw unauthorized('worker token is malformed');
  }
  const [, payload, signature] = parts as [string, string, string];
  const sig = Buffer.from(signature, 'base64url');
  const signed = `${WORKER_TOKEN_PREFIX}.${payload}`;
  let good = false;
  // Every key is tried (no early exit) so timing does not tell which key matched.
  for (const key of opts.keys) {
    if (key === '') continue;
    const expected = hmac(key, signed);
    if (sig.length === expected.length && timingSafeEqual(sig, expected)) good = true;
  }
  if (!good) throw unauthorized('worker token signature is invalid');
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw unauthorized('worker token claims are malformed');
  }
  return validateWorkerClaims(claims, { worker_id: opts.workerId, audience: opts.audience, now: opts.now, revoked: opts.revoked });
}

/**
 * Checks a presented worker id and token (spec 5.2). A worker with a per-worker token accepts only
 * that token; otherwise the shared token or a signed token. Throws `unauthorized`; messages never
 * contain a credential. `workerId` and `token` are '' when the request had none.
 */
export function checkWorkerCredential(
  workerId: string,
  token: string,
  creds: WorkerCredentials,
  audience: string,
  now: Date,
): WorkerIdentity {
  if (!workerAuthConfigured(creds)) {
    throw unauthorized(
      'worker authentication is not configured on this server (set auth.worker_token, auth.worker_tokens or auth.worker_signing_key)',
    );
  }
  if (workerId === '' || token === '') throw unauthorized('worker requests need X-Worker-ID and X-Worker-Token (or Authorization: Bearer)');

  const all = [...WORKER_SCOPES];
  if (Object.hasOwn(creds.tokens, workerId)) {
    if (safeEqual(token, creds.tokens[workerId]!)) return { worker_id: workerId, scopes: all, expires: null, via: 'worker_token' };
    throw unauthorized('invalid worker credentials');
  }
  if (isSignedWorkerToken(token)) {
    if (creds.signing_keys.length === 0) throw unauthorized('signed worker tokens are not accepted by this server');
    return verifyWorkerToken(token, { keys: creds.signing_keys, audience, workerId, now, revoked: creds.revoked_token_ids });
  }
  if (safeEqual(token, creds.shared_token)) return { worker_id: workerId, scopes: all, expires: null, via: 'shared_token' };
  throw unauthorized('invalid worker credentials');
}
