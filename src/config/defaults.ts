import type { SbxConfig } from './types.js';

/** Built-in defaults (DESIGN.md §3). `~` in paths is expanded against the home directory on load. */
export const DEFAULTS: Readonly<SbxConfig> = Object.freeze({
  server: {
    host: '127.0.0.1',
    port: 7423,
    preview_domain: '',
    preview_auth: false,
    preview_addr: '',
    cors_allowed_origins: ['*'],
    allowed_hosts: [],
    body_limit_mb: 64,
    max_inflight_mb: 256,
    local_worker: true,
    replica_id: '',
    reaper_interval: '10s',
    leader_ttl: '15s',
    ui: true,
  },
  defaults: {
    ttl: '30m',
    image: 'debian:bookworm-slim',
    memory_mb: 512,
    vcpus: 1,
    max_ttl: '24h',
    default_exec_timeout: '0s',
    max_exec_timeout: '10m',
    max_sandboxes: 0,
    max_sandboxes_per_owner: 0,
    spawn_overflow: 'reject',
    spawn_queue_timeout: '30s',
    max_spawn_queue: 100,
    network: '',
    warm: 0,
    warm_destroy_on_shutdown: false,
    max_file_mb: 64,
    max_exec_output_mb: 16,
  },
  auth: {
    enabled: false,
    admin_fallback_enabled: true,
    enforce_ownership: false,
    admin_audit_retention: '720h',
    worker_tokens: {},
    worker_signing_keys: [],
    worker_revoked_token_ids: [],
  },
  rate_limit: {
    enabled: false,
    requests_per_minute: 120,
    burst: 60,
    key_by: 'owner',
    bucket_ttl: '15m',
    cleanup_interval: '1m',
  },
  providers: {
    default: 'auto',
    docker: {
      socket_path: '',
      host: '',
      runtime: 'runc',
      network_mode: 'bridge',
      pids_limit: 256,
      added_caps: [],
      seccomp_profile: '',
      read_only_rootfs: false,
      user: '',
    },
    proot: { binary: 'proot', rootfs: '', allow_unisolated: false },
    mock: { root_dir: '', enabled: false },
    hosted: {},
    firecracker: { binary: 'firecracker', kernel_path: '', rootfs_path: '', data_dir: '' },
    custom_http: { timeout: '30s' },
  },
  pool: { enabled: false, max_vms: 0, max_users_per_vm: 0 },
  worker: {
    heartbeat_interval: '30s',
    state_path: '',
    rpc_tls: { enabled: false, insecure_skip_verify: false },
  },
  database: { driver: 'sqlite', path: '~/.sbx/sbx.db' },
  logging: { level: 'info', format: 'auto' },
} satisfies SbxConfig);

/** A fresh, mutable copy of the defaults. */
export function defaultConfig(): SbxConfig {
  return structuredClone(DEFAULTS) as SbxConfig;
}
