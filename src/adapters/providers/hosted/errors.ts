import { isAbortError, isSbxError, SbxError } from '../../../core/errors.js';

/** Bound of one REST or envd request that is not a stream (create, get, stat, …). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** Which side answered: the hosted REST API (API key) or a sandbox's envd (access token). */
export type Side = 'api' | 'envd';

/** A failed HTTP exchange before it is translated: its status, and no body text (never echoed). */
export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly side: Side,
  ) {
    super(`HTTP ${status}`);
    this.name = 'HttpStatusError';
  }
}

/** A Connect RPC error (`{code, message}` end-stream or unary body); only the code is kept. */
export class ConnectError extends Error {
  constructor(readonly code: string) {
    super(`connect error ${code}`);
    this.name = 'ConnectError';
  }
}

/** Our own deadline (not the caller's cancel) passed. */
export class DeadlineError extends Error {
  constructor(readonly ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = 'DeadlineError';
  }
}

/** A body that is not what the documented shape says (garbage, truncated JSON, a bad frame). */
export class ShapeError extends Error {
  constructor(what: string) {
    super(what);
    this.name = 'ShapeError';
  }
}

const CONNECT_CODES: Record<string, SbxError['code']> = {
  not_found: 'not_found',
  invalid_argument: 'bad_request',
  already_exists: 'conflict',
  failed_precondition: 'bad_request',
  out_of_range: 'bad_request',
  resource_exhausted: 'resource_limit',
  deadline_exceeded: 'timeout',
  unavailable: 'unavailable',
  unimplemented: 'not_implemented',
};

function whoRejected(side: Side): string {
  return side === 'api' ? 'hosted provider rejected the API key' : 'hosted sandbox rejected its access token';
}

/**
 * Translates a failure into an SbxError in our own words: backend bodies may echo keys, tokens,
 * env values or paths, so their text never leaves this adapter, and the API key never appears.
 */
export function toSbxError(err: unknown, what: string): SbxError {
  if (isSbxError(err)) return err;
  if (err instanceof DeadlineError)
    return new SbxError('timeout', `${what}: hosted provider did not answer within ${Math.round(err.ms / 1000)}s`);
  if (err instanceof ShapeError)
    return new SbxError('provider_error', `${what}: hosted provider sent an unexpected answer (${err.message})`);
  if (err instanceof ConnectError) {
    if (err.code === 'unauthenticated' || err.code === 'permission_denied')
      return new SbxError('provider_error', `${what}: ${whoRejected('envd')}`);
    const code = CONNECT_CODES[err.code] ?? 'provider_error';
    return new SbxError(code, `${what}: ${code === 'not_found' ? 'no such file or directory' : `sandbox daemon answered ${err.code}`}`);
  }
  if (err instanceof HttpStatusError) {
    const s = err.status;
    if (s === 401 || s === 403) return new SbxError('provider_error', `${what}: ${whoRejected(err.side)}`);
    if (s === 404) return new SbxError('not_found', `${what}: not found`);
    if (s === 429) return new SbxError('resource_limit', `${what}: hosted provider rate limit or sandbox quota reached`);
    if (s === 400) return new SbxError('bad_request', `${what}: hosted provider refused the request (400)`);
    if (s === 507) return new SbxError('resource_limit', `${what}: sandbox disk is full`);
    if (s === 502 || s === 503 || s === 504) return new SbxError('unavailable', `${what}: hosted provider unavailable (${s})`);
    return new SbxError('provider_error', `${what}: hosted provider answered ${s}`);
  }
  if (isAbortError(err)) return new SbxError('timeout', `${what}: request aborted before the hosted provider answered`);
  return new SbxError('unavailable', `${what}: hosted provider unreachable`);
}

/**
 * A signal for one request: the caller's, plus our own deadline. `expired()` tells the deadline
 * from the caller's cancel (the latter stays an abort error: core tells cancels from failures by it).
 */
export function deadline(signal: AbortSignal | undefined, ms: number): { signal: AbortSignal; expired: () => boolean; clear: () => void } {
  const ac = new AbortController();
  let hit = false;
  const timer = setTimeout(() => {
    hit = true;
    ac.abort(new DeadlineError(ms));
  }, ms);
  timer.unref?.();
  const onAbort = () => ac.abort(signal?.reason);
  if (signal?.aborted) ac.abort(signal.reason);
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: ac.signal,
    expired: () => hit,
    clear: () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** Runs `fn` under a deadline; failures become SbxErrors naming `what`. */
export async function bounded<T>(
  what: string,
  ms: number,
  signal: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const d = deadline(signal, ms);
  try {
    return await fn(d.signal);
  } catch (err) {
    if (d.expired()) throw toSbxError(new DeadlineError(ms), what);
    if (signal?.aborted && isAbortError(err)) throw err;
    throw toSbxError(err, what);
  } finally {
    d.clear();
  }
}
