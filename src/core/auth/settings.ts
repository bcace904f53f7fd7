/**
 * Credentials the HTTP transport and the worker RPC check (spec Part 5). compose/ derives them
 * from the validated config; secret values live only here and are compared, never echoed.
 */
export interface WorkerCredentials {
  /** `auth.worker_token`: shared token; '' = none. */
  shared_token: string;
  /** `auth.worker_tokens`: a worker with an entry accepts only that token. */
  tokens: Record<string, string>;
  /** Active `auth.worker_signing_key` first, then the rotation keys. Empty = signed tokens off. */
  signing_keys: string[];
  /** `auth.worker_revoked_token_ids`. */
  revoked_token_ids: string[];
}

export interface AuthSettings {
  /** `auth.enabled`: X-API-Key required on /api/v1 except the probes. */
  enabled: boolean;
  /** `auth.api_key`; '' = none. */
  api_key: string;
  /** `auth.admin_api_key`; '' = none. */
  admin_api_key: string;
  /** `auth.admin_fallback_enabled`: with no admin key, admin routes accept `auth.api_key`. */
  admin_fallback_enabled: boolean;
  /** `auth.admin_audit_retention` in ms; 0 = keep forever. */
  audit_retention_ms: number;
  worker: WorkerCredentials;
}

/** No keys at all: a single-user dev box. */
export const OPEN_AUTH: AuthSettings = {
  enabled: false,
  api_key: '',
  admin_api_key: '',
  admin_fallback_enabled: true,
  audit_retention_ms: 0,
  worker: { shared_token: '', tokens: {}, signing_keys: [], revoked_token_ids: [] },
};

/**
 * The key admin routes accept: `auth.admin_api_key`, else (auth on, fallback allowed) `auth.api_key`.
 * '' means no admin credential exists.
 */
export function effectiveAdminKey(auth: AuthSettings): string {
  if (auth.admin_api_key !== '') return auth.admin_api_key;
  if (auth.enabled && auth.admin_fallback_enabled) return auth.api_key;
  return '';
}

/** True when any worker credential is configured. */
export function workerAuthConfigured(w: WorkerCredentials): boolean {
  return w.shared_token !== '' || Object.keys(w.tokens).length > 0 || w.signing_keys.length > 0;
}
