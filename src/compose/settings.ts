import { hostname } from 'node:os';
import type { SbxConfig } from '../config/index.js';
import { tryParseDuration } from '../core/duration.js';
import type { CoreSettings } from '../core/settings.js';
import { VERSION } from '../version.js';

const ms = (s: string | undefined, fallback = 0) => (s ? (tryParseDuration(s) ?? fallback) : fallback);
const MiB = 1024 * 1024;

/** Derives what core needs from the validated config (durations → ms, sizes → bytes). */
export function coreSettings(config: SbxConfig, defaultProvider: string): CoreSettings {
  const d = config.defaults;
  return {
    version: VERSION,
    worker_id: 'local',
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
    },
    limits: {
      max_file_bytes: Math.floor(d.max_file_mb * MiB),
      max_exec_output_bytes: Math.floor(d.max_exec_output_mb * MiB),
    },
    enforce_ownership: config.pool.enabled || config.auth.enforce_ownership,
  };
}
