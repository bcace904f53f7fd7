/** CLI-side errors and the single translation of errors into a message and an exit code. */
import { SbxError } from '../../contracts/errors.js';
import { EXIT } from './exit-codes.js';

/** Wrong command line (bad flag value, missing argument): exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Bad client configuration (profile file, server URL): exit 3. */
export class CliConfigError extends Error {
  override readonly name = 'CliConfigError';
}

/** A command that already explained itself and wants a specific exit code. */
export class ExitError extends Error {
  override readonly name = 'ExitError';
  constructor(
    readonly exitCode: number,
    message = '',
  ) {
    super(message);
  }
}

export interface KeyState {
  apiKey: boolean;
  adminKey: boolean;
}

/** Exit code for any error reaching the top level. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof ExitError) return err.exitCode;
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof CliConfigError) return EXIT.config;
  if (err instanceof SbxError) {
    switch (err.code) {
      case 'not_found':
        return EXIT.notFound;
      case 'resource_limit':
        return EXIT.rejected;
      case 'unavailable':
      case 'remote_worker_rpc_unavailable':
        return EXIT.unavailable;
      case 'timeout':
        return EXIT.execTimeout;
      default:
        return EXIT.failure;
    }
  }
  if ((err as { name?: string })?.name === 'ConfigError') return EXIT.config;
  return EXIT.failure;
}

/** The one-line message for an error (without the `sbx: ` prefix); empty = nothing to print. */
export function messageFor(err: unknown, keys: KeyState): string {
  if (err instanceof ExitError) return err.message;
  if (err instanceof SbxError && err.code === 'unauthorized') {
    const path = String(err.details?.path ?? '');
    if (path.startsWith('/api/v1/admin/')) {
      return keys.adminKey
        ? `the server rejected the admin key: ${err.message} (check --admin-key / SBX_ADMIN_API_KEY)`
        : `an admin key is required: ${err.message} (pass --admin-key or set SBX_ADMIN_API_KEY)`;
    }
    return keys.apiKey
      ? `the server rejected the API key: ${err.message} (check --api-key / SBX_API_KEY)`
      : `an API key is required: ${err.message} (pass --api-key or set SBX_API_KEY)`;
  }
  if (err instanceof SbxError && err.code === 'forbidden') {
    return `${err.message} (this needs the admin key: pass --admin-key or set SBX_ADMIN_API_KEY)`;
  }
  if (err instanceof Error) return err.message;
  return String(err);
}
