/**
 * The error that crosses the wire: its codes (the `code` of every error body `{code, message}`,
 * DESIGN.md §3 "Statuses and codes") and the error type the client library and the CLI use.
 * `import { SbxError } from 'sbx-cli'` is this class.
 *
 * core/errors.ts keeps the domain's own SbxError. Both carry the same brand
 * (`Symbol.for('sbx.error')`), so `err instanceof SbxError` holds for either, whichever module the
 * check names: an error keeps its identity from core, over HTTP, to the CLI's exit code.
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
  /** Extra members of the error body (e.g. stdout/stderr of a timed-out exec, the HTTP status). */
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

/** HTTP status for each error code (spec Part 7, DESIGN.md §3). */
export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  resource_limit: 429,
  provider_error: 500,
  internal: 500,
  unavailable: 503,
  remote_worker_rpc_unavailable: 503,
  not_implemented: 501,
  bad_gateway: 502,
};
