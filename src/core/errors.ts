/**
 * The domain's error type. Core and adapters throw it; only the edges translate it (HTTP status +
 * `{code, message}` body, CLI exit code). The wire twin is contracts/errors.ts (client and CLI);
 * both carry the brand `Symbol.for('sbx.error')`, so `instanceof` holds across the two, and the
 * code lists are the same (checked at compile time in transports/http/errors.ts).
 */
export const ERROR_CODES = [
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'timeout',
  'conflict',
  'payload_too_large',
  'resource_limit',
  'provider_error',
  'unavailable',
  'remote_worker_rpc_unavailable',
  'not_implemented',
  'bad_gateway',
  'internal',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const BRAND = Symbol.for('sbx.error');

export class SbxError extends Error {
  readonly code: ErrorCode;
  /** Extra members merged into the error body (e.g. stdout/stderr of a timed-out exec). Never secrets. */
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'SbxError';
    this.code = code;
    this.details = details;
    Object.defineProperty(this, BRAND, { value: true });
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new SbxError('bad_request', message, details);
export const notFound = (message: string) => new SbxError('not_found', message);
export const conflict = (message: string) => new SbxError('conflict', message);
export const resourceLimit = (message: string, details?: Record<string, unknown>) => new SbxError('resource_limit', message, details);
export const providerError = (message: string) => new SbxError('provider_error', message);
export const unavailable = (message: string) => new SbxError('unavailable', message);

export function isSbxError(err: unknown): err is SbxError {
  return err instanceof SbxError;
}

/** Keeps typed SbxErrors; anything else becomes a generic provider_error (no backend text leaks). */
export function asProviderError(err: unknown, message: string): SbxError {
  if (isSbxError(err)) return err;
  return new SbxError('provider_error', message);
}

/** True for errors coming from an AbortSignal (cancel or deadline). */
export function isAbortError(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    ((err as { name?: string }).name === 'AbortError' || (err as { code?: string }).code === 'ABORT_ERR')
  );
}
