import { isAbortError, isSbxError, SbxError } from '../../../core/errors.js';

/** Bound for one non-streaming engine call (inspect, create, remove, …). */
export const API_TIMEOUT_MS = 30_000;

/** HTTP status of a dockerode/docker-modem error, if it carries one. */
export function statusOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

/** True when the engine answered 404 (no such container, image, exec or path). */
export function isNotFound(err: unknown): boolean {
  return statusOf(err) === 404;
}

/** The engine's own error text, for classifying a failure here; it never reaches a caller. */
export function engineMessage(err: unknown): string {
  const json = (err as { json?: unknown } | null)?.json;
  const message = typeof json === 'object' && json !== null ? (json as { message?: unknown }).message : json;
  return typeof message === 'string' ? message : '';
}

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' && ['ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EACCES', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code)
  );
}

/** What the engine says of a container a destroy is removing (as 409 or 500, depending on the call). */
const BEING_REMOVED = /marked for removal|removal (of container .* )?(is )?already in progress|is being removed|container .* is dead/i;

/**
 * Translates an engine failure into an SbxError with our own words only: engine bodies can echo
 * registry credentials, env values or paths, so their text never leaves this adapter.
 */
export function toSbxError(err: unknown, what: string): SbxError {
  if (isSbxError(err)) return err;
  if (isAbortError(err)) return new SbxError('timeout', `${what}: docker engine did not answer in time`);
  if (isConnectionError(err)) return new SbxError('provider_error', `${what}: docker engine unreachable`);
  const status = statusOf(err);
  // The sandbox is being destroyed under the operation: gone, not a provider failure.
  if ((status === 409 || status === 500) && BEING_REMOVED.test(engineMessage(err)))
    return new SbxError('not_found', `${what}: sandbox runtime is being removed`);
  if (status === 409) return new SbxError('provider_error', `${what}: sandbox runtime is not running`);
  if (status === 404) return new SbxError('provider_error', `${what}: sandbox runtime not found`);
  return new SbxError('provider_error', status ? `${what}: docker engine answered ${status}` : `${what}: docker engine failed`);
}

/** A signal that aborts with the caller's signal or after `ms`, whichever comes first. */
export function bounded(signal: AbortSignal | undefined, ms = API_TIMEOUT_MS): AbortSignal {
  const t = AbortSignal.timeout(ms);
  return signal ? AbortSignal.any([signal, t]) : t;
}

/** Runs an engine call with a bound; failures become SbxErrors naming `what`. */
export async function call<T>(what: string, fn: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal, ms?: number): Promise<T> {
  try {
    return await fn(bounded(signal, ms));
  } catch (err) {
    // The caller's own cancel stays an abort error: core tells cancels from failures by it.
    if (signal?.aborted && isAbortError(err)) throw err;
    throw toSbxError(err, what);
  }
}
