import { Code, ConnectError } from '@connectrpc/connect';
import { STATUS_BY_CODE } from '../../../contracts/errors.js';
import { isAbortError, isSbxError, type SbxError } from '../../../core/errors.js';

/** sbx's error codes → Connect codes, chosen so E2B's SDK raises its own typed errors. */
const CONNECT_CODE: Partial<Record<SbxError['code'], Code>> = {
  bad_request: Code.InvalidArgument,
  unauthorized: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  not_found: Code.NotFound,
  conflict: Code.FailedPrecondition,
  payload_too_large: Code.ResourceExhausted,
  resource_limit: Code.ResourceExhausted,
  not_implemented: Code.Unimplemented,
  unavailable: Code.Unavailable,
  timeout: Code.DeadlineExceeded,
};

/** Any failure inside an envd RPC as a ConnectError: core's message for an SbxError, never internals otherwise. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (isSbxError(err)) return new ConnectError(err.message, CONNECT_CODE[err.code] ?? Code.Internal);
  if (isAbortError(err)) return new ConnectError('the call was cancelled', Code.Canceled);
  return new ConnectError('internal error', Code.Internal);
}

/** envd's HTTP error body (`/files`, `/health`): `{code: <status>, message}`, which the SDK reads. */
export function httpErrorOf(err: unknown): { status: number; body: { code: number; message: string } } {
  if (isSbxError(err)) {
    const status = STATUS_BY_CODE[err.code] ?? 500;
    return { status, body: { code: status, message: err.message } };
  }
  return { status: 500, body: { code: 500, message: 'internal error' } };
}
