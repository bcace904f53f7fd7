import { parseEgress } from '../core/network/rules.js';
import { hostname } from 'node:os';
import type { SbxConfig } from '../config/index.js';
import type { RateLimitSettings } from '../core/admission/rate-limiter.js';
import type { AuthSettings } from '../core/auth/settings.js';
import { tryParseDuration } from '../shared/duration.js';
import type { CoreSettings } from '../core/settings.js';
import { VERSION } from '../version.js';

const ms = (s: string | undefined, fallback = 0) => (s ? (tryParseDuration(s) ?? fallback) : fallback);
const MiB = 1024 * 1024;

/** Derives what core needs from the validated config (durations → ms, sizes → bytes). */
export function coreSettings(config: SbxConfig, defaultProvider: string, workerId = 'local'): CoreSettings {
  const d = config.defaults;
  return {
    version: VERSION,
    worker_id: workerId,
    hostname: hostname(),
    preview_domain: config.server.preview_domain ?? '',
    default_provider: defaultProvider,
    defaults: {
      image: d.image,
      memory_mb: d.memory_mb,
      vcpus: d.vcpus,
      ttl_ms: ms(d.ttl, 30 * 60_000),
      max_ttl_ms: ms(d.max_ttl),
      default_exec_timeout_ms: ms(d.default_exec_timeout),
      max_exec_timeout_ms: ms(d.max_exec_timeout),
      max_sandboxes: d.max_sandboxes,
      max_sandboxes_per_owner: d.max_sandboxes_per_owner,
      spawn_overflow: d.spawn_overflow,
      spawn_queue_timeout_ms: ms(d.spawn_queue_timeout, 30_000),
      max_spawn_queue: d.max_spawn_queue,
      network: d.network,
      // Checked at start: a bad default rule is the operator's to fix, not every spawn's 400.
      egress: d.network === 'filtered' ? parseEgress(d.egress) : { allow: [...d.egress.allow], deny: [...d.egress.deny] },
      warm: d.warm,
      warm_destroy_on_shutdown: d.warm_destroy_on_shutdown,
      auto_pause_ms: ms(d.auto_pause),
      paused_ttl_ms: ms(d.paused_ttl, 24 * 3_600_000),
    },
    limits: {
      max_file_bytes: Math.floor(d.max_file_mb * MiB),
      max_exec_output_bytes: Math.floor(d.max_exec_output_mb * MiB),
    },
    pool: {
      enabled: config.pool.enabled,
      max_vms: config.pool.max_vms || 4,
      max_users_per_vm: config.pool.max_users_per_vm || 8,
      image: config.pool.image || d.image,
      memory_mb: config.pool.memory_mb ?? d.memory_mb,
      vcpus: config.pool.vcpus ?? d.vcpus,
      provider: config.pool.provider || defaultProvider,
    },
    enforce_ownership: config.pool.enabled || config.auth.enforce_ownership,
  };
}

/** `server.max_inflight_mb` in bytes (the HTTP in-flight budget); unset or not positive → 256 MiB. */
export function maxInflightBytes(config: SbxConfig): number {
  const mb = config.server.max_inflight_mb;
  return Math.floor((typeof mb === 'number' && mb > 0 ? mb : 256) * MiB);
}

/** Credentials for the HTTP transport and worker RPC (spec Part 5); secret files are already read. */
export function authSettings(config: SbxConfig): AuthSettings {
  const a = config.auth;
  const signing = [a.worker_signing_key ?? '', ...a.worker_signing_keys].filter((k) => k !== '');
  return {
    enabled: a.enabled,
    api_key: a.api_key ?? '',
    admin_api_key: a.admin_api_key ?? '',
    admin_fallback_enabled: a.admin_fallback_enabled,
    audit_retention_ms: ms(a.admin_audit_retention),
    worker: {
      shared_token: a.worker_token ?? '',
      tokens: Object.fromEntries(Object.entries(a.worker_tokens).filter(([, t]) => typeof t === 'string' && t !== '')),
      signing_keys: [...new Set(signing)],
      revoked_token_ids: [...a.worker_revoked_token_ids],
    },
  };
}

/** API rate limiting (spec 8), durations in ms. */
export function rateLimitSettings(config: SbxConfig): RateLimitSettings {
  const r = config.rate_limit;
  return {
    enabled: r.enabled,
    requests_per_minute: r.requests_per_minute,
    burst: r.burst,
    key_by: r.key_by,
    bucket_ttl_ms: ms(r.bucket_ttl, 15 * 60_000),
    cleanup_interval_ms: ms(r.cleanup_interval, 60_000),
  };
}
