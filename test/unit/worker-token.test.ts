import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WorkerCredentials } from '../../src/core/auth/settings.js';
import { AUD_CONTROL_PLANE, AUD_RPC, WORKER_SCOPES } from '../../src/core/auth/worker-claims.js';
import { isSbxError } from '../../src/core/errors.js';
import { authenticateWorker, mintWorkerToken, safeEqual, verifyWorkerToken } from '../../src/transports/shared/worker-auth.js';

const KEY = 'signing-key-0123456789abcdef0123456789';
const OLD_KEY = 'previous-key-abcdef0123456789abcdef01';
const NOW = new Date('2030-01-01T00:00:00Z');
const T = Math.floor(NOW.getTime() / 1000);

const creds = (over: Partial<WorkerCredentials> = {}): WorkerCredentials => ({
  shared_token: '',
  tokens: {},
  signing_keys: [KEY, OLD_KEY],
  revoked_token_ids: [],
  ...over,
});

const headers = (workerId: string, token: string) => ({ 'x-worker-id': workerId, 'x-worker-token': token });

function rejects(fn: () => unknown, pattern: RegExp): void {
  try {
    fn();
  } catch (err) {
    expect(isSbxError(err)).toBe(true);
    expect((err as { code: string }).code).toBe('unauthorized');
    expect((err as Error).message).toMatch(pattern);
    return;
  }
  throw new Error('expected a rejection');
}

/** Hand-built token, so the tests do not only trust mintWorkerToken's encoding. */
function handToken(key: string, claims: Record<string, unknown>): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const sig = createHmac('sha256', key).update(`svc-worker-v1.${payload}`).digest('base64url');
  return `svc-worker-v1.${payload}.${sig}`;
}

const verify = (token: string, workerId = 'w1', audience = AUD_CONTROL_PLANE, revoked: string[] = []) =>
  verifyWorkerToken(token, { keys: [KEY, OLD_KEY], audience, workerId, now: NOW, revoked });

describe('signed worker tokens', () => {
  it('accepts a valid token and yields worker_id, scopes and expires', () => {
    const token = handToken(KEY, {
      worker_id: 'w1',
      jti: 'j1',
      aud: AUD_CONTROL_PLANE,
      scopes: ['worker:heartbeat', 'admin:all'],
      iat: T - 10,
      exp: T + 290,
    });
    expect(token).toMatch(/^svc-worker-v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    const id = verify(token);
    expect(id).toEqual({
      worker_id: 'w1',
      scopes: ['worker:heartbeat'],
      expires: new Date((T + 290) * 1000).toISOString(),
      via: 'signed_token',
    });
  });

  it('mintWorkerToken produces what verify accepts, with all scopes when none are listed', () => {
    const token = mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_RPC }, { now: NOW, ttlSeconds: 120 });
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(claims).toMatchObject({ worker_id: 'w1', aud: 'worker:rpc', iat: T, exp: T + 120 });
    expect(claims.jti).toMatch(/^[0-9a-f]{24}$/);
    const id = verify(token, 'w1', AUD_RPC);
    expect(id.scopes).toEqual([...WORKER_SCOPES]);
    expect(id.expires).toBe(new Date((T + 120) * 1000).toISOString());
  });

  it('caps minted lifetimes at 15 minutes', () => {
    const token = mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_RPC }, { now: NOW, ttlSeconds: 3600 });
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(claims.exp - claims.iat).toBe(900);
  });

  it('rejects an expired token (beyond the 30 s skew) and accepts one just inside it', () => {
    rejects(() => verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T - 400, exp: T - 31 })), /expired/);
    expect(verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T - 400, exp: T - 29 })).worker_id).toBe('w1');
  });

  it('rejects a token that is not valid yet', () => {
    rejects(
      () => verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, nbf: T + 120, exp: T + 300 })),
      /not valid yet/,
    );
    rejects(() => verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T + 120, exp: T + 300 })), /future/);
  });

  it('rejects the wrong audience', () => {
    const rpc = handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_RPC, iat: T, exp: T + 60 });
    rejects(() => verify(rpc, 'w1', AUD_CONTROL_PLANE), /audience/);
    expect(verify(rpc, 'w1', AUD_RPC).worker_id).toBe('w1');
  });

  it('rejects a token whose worker_id differs from X-Worker-ID', () => {
    const token = handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 });
    rejects(() => verify(token, 'w2'), /X-Worker-ID/);
  });

  it('rejects a revoked jti', () => {
    const token = handToken(KEY, { worker_id: 'w1', jti: 'gone', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 });
    rejects(() => verify(token, 'w1', AUD_CONTROL_PLANE, ['gone']), /revoked/);
  });

  it('accepts a rotation key and rejects an unknown key', () => {
    expect(verify(handToken(OLD_KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 })).worker_id).toBe('w1');
    rejects(
      () => verify(handToken('some-other-key', { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 })),
      /signature/,
    );
  });

  it('rejects a lifetime over 15 minutes (+30 s skew) when iat is present', () => {
    rejects(() => verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 931 })), /15 minutes/);
    expect(verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 930 })).worker_id).toBe('w1');
  });

  it('rejects tampered payloads, padded signatures and missing claims', () => {
    const token = handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 });
    const [p, payload, sig] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 600 })).toString(
      'base64url',
    );
    rejects(() => verify(`${p}.${forged}.${sig}`), /signature/);
    rejects(() => verify(`${p}.${payload}.${sig}=`), /malformed/);
    rejects(() => verify(`svc-worker-v2.${payload}.${sig}`), /malformed/);
    rejects(() => verify(handToken(KEY, { worker_id: 'w1', aud: AUD_CONTROL_PLANE, iat: T, exp: T + 60 })), /jti/);
    rejects(() => verify(handToken(KEY, { worker_id: 'w1', jti: 'j', aud: AUD_CONTROL_PLANE, iat: T })), /exp/);
  });
});

describe('authenticateWorker', () => {
  it('says so when no worker credential is configured', () => {
    rejects(() => authenticateWorker(headers('w1', 'x'), creds({ signing_keys: [] }), AUD_CONTROL_PLANE, NOW), /not configured/);
  });

  it('needs both X-Worker-ID and a token', () => {
    rejects(
      () =>
        authenticateWorker(
          { 'x-worker-token': 'shared-token-value' },
          creds({ shared_token: 'shared-token-value' }),
          AUD_CONTROL_PLANE,
          NOW,
        ),
      /X-Worker-ID/,
    );
    rejects(
      () => authenticateWorker({ 'x-worker-id': 'w1' }, creds({ shared_token: 'shared-token-value' }), AUD_CONTROL_PLANE, NOW),
      /X-Worker-ID/,
    );
  });

  it('accepts the shared token via X-Worker-Token or Authorization: Bearer', () => {
    const c = creds({ shared_token: 'shared-token-value' });
    expect(authenticateWorker(headers('w1', 'shared-token-value'), c, AUD_CONTROL_PLANE, NOW)).toMatchObject({
      worker_id: 'w1',
      via: 'shared_token',
      expires: null,
    });
    expect(authenticateWorker({ 'x-worker-id': 'w1', authorization: 'Bearer shared-token-value' }, c, AUD_CONTROL_PLANE, NOW).via).toBe(
      'shared_token',
    );
    rejects(() => authenticateWorker(headers('w1', 'shared-token-valuX'), c, AUD_CONTROL_PLANE, NOW), /invalid worker credentials/);
  });

  it('per-worker map beats the shared token (and signed tokens) for that worker only', () => {
    const c = creds({ shared_token: 'shared-token-value', tokens: { w1: 'w1-own-token' } });
    expect(authenticateWorker(headers('w1', 'w1-own-token'), c, AUD_CONTROL_PLANE, NOW).via).toBe('worker_token');
    rejects(() => authenticateWorker(headers('w1', 'shared-token-value'), c, AUD_CONTROL_PLANE, NOW), /invalid/);
    rejects(
      () =>
        authenticateWorker(
          headers('w1', mintWorkerToken(KEY, { worker_id: 'w1', aud: AUD_CONTROL_PLANE }, { now: NOW })),
          c,
          AUD_CONTROL_PLANE,
          NOW,
        ),
      /invalid/,
    );
    // Another worker still uses the shared token, and cannot use w1's token.
    expect(authenticateWorker(headers('w2', 'shared-token-value'), c, AUD_CONTROL_PLANE, NOW).worker_id).toBe('w2');
    rejects(() => authenticateWorker(headers('w2', 'w1-own-token'), c, AUD_CONTROL_PLANE, NOW), /invalid/);
  });

  it('verifies signed tokens with the request audience', () => {
    const c = creds();
    const token = mintWorkerToken(OLD_KEY, { worker_id: 'w9', aud: AUD_CONTROL_PLANE, scopes: ['worker:lease'] }, { now: NOW });
    expect(authenticateWorker({ 'x-worker-id': 'w9', authorization: `Bearer ${token}` }, c, AUD_CONTROL_PLANE, NOW)).toMatchObject({
      worker_id: 'w9',
      scopes: ['worker:lease'],
    });
    rejects(() => authenticateWorker(headers('w9', token), c, AUD_RPC, NOW), /audience/);
    rejects(
      () => authenticateWorker(headers('w9', token), creds({ signing_keys: [], shared_token: 's' }), AUD_CONTROL_PLANE, NOW),
      /not accepted/,
    );
  });

  it('never puts the credential in an error message', () => {
    const secret = 'super-secret-worker-token-value';
    const err = (() => {
      try {
        authenticateWorker(headers('w1', secret), creds({ shared_token: 'other-shared-secret' }), AUD_CONTROL_PLANE, NOW);
      } catch (e) {
        return e as Error;
      }
      return null;
    })();
    expect(err?.message).toBe('invalid worker credentials');
  });
});

describe('safeEqual', () => {
  it('compares by value, any length, and never matches an empty expected secret', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', '')).toBe(false);
  });
});
