/**
 * The typed configuration tree. Durations stay Go-style strings here (validated on load);
 * compose/ turns them into milliseconds. Optional keys have no meaningful default.
 */

export type ProviderChoice = 'auto' | 'docker' | 'proot' | 'mock' | 'firecracker' | 'hosted' | 'custom_http' | 'custom-http';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
/** Docker registry credentials: an encoded X-Registry-Auth string or an auth object. */
export type RegistryAuth = string | Record<string, string>;

export interface ServerConfig {
  host: string;
  /** 0 asks the OS for a free port. */
  port: number;
  preview_domain: string;
  /** Previews need the sandbox's preview token (DESIGN §9). */
  preview_auth: boolean;
  /** `host:port` of an extra listener that serves previews alone; '' = none. */
  preview_addr: string;
  cors_allowed_origins: string[];
  /** Extra host names the dev-box guard accepts in `Host` while auth is off (DESIGN §3). */
  allowed_hosts: string[];
  body_limit_mb: number;
  /** Global cap on request bytes in flight plus buffered exec output; over it → 503 + Retry-After. */
  max_inflight_mb: number;
  /** This node runs sandboxes itself (placement may choose it); false = a pure control plane (DESIGN §7). */
  local_worker: boolean;
  /** This replica's id among replicas on one database (DESIGN §7); empty = hostname:port. */
  replica_id: string;
  /** How often the reaper passes. */
  reaper_interval: string;
  /** TTL of the replica and leader leases: a dead leader's tasks move within about this long. */
  leader_ttl: string;
  /**
   * The URL other replicas reach this one's worker RPC at (`/rpc` on the API listener, DESIGN §7);
   * '' = `http://<server.host>:<port>`, or the machine's hostname when the host is a wildcard.
   */
  advertise_url: string;
  /** How often remote-owned sandboxes are reconciled against their workers (default 30s). */
  reconcile_interval: string;
  /** Serve the web dashboard at /ui (it holds no data; every API call it makes carries the user's key). */
  ui: boolean;
  /** Serve MCP over streamable HTTP at /mcp, behind the API key (the tools of `sbx mcp`, acting as the caller). */
  mcp: boolean;
  /** Serve E2B's control-plane REST API under /e2b (DESIGN.md §14), behind the same API keys; false → 404 there. */
  e2b: boolean;
}

export interface DefaultsConfig {
  ttl: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  /** `0s` = no maximum. */
  max_ttl: string;
  /** `0s` = no default timeout. */
  default_exec_timeout: string;
  /** `0s` = no maximum. */
  max_exec_timeout: string;
  /** 0 = unlimited. */
  max_sandboxes: number;
  /** 0 = unlimited. */
  max_sandboxes_per_owner: number;
  spawn_overflow: 'reject' | 'queue';
  spawn_queue_timeout: string;
  max_spawn_queue: number;
  /** Network of spawns that name none (DESIGN §10): '' = the provider's own default. */
  network: '' | 'none' | 'bridge' | 'filtered';
  /** Egress lists of spawns that get `filtered` from `network` (DESIGN §10). */
  egress: { allow: string[]; deny: string[] };
  /** Warm runtimes kept ready for the default shape (DESIGN.md §11); 0 = none. */
  warm: number;
  /** Destroy warm runtimes when the server stops (default: keep them for the next start). */
  warm_destroy_on_shutdown: boolean;
  /** Spawns that name no `auto_pause` are paused after this long without activity (DESIGN.md §16); `0s` = never. */
  auto_pause: string;
  /** How long a sandbox paused by `on_expire: pause` stays before it is destroyed (DESIGN.md §16). */
  paused_ttl: string;
  max_file_mb: number;
  max_exec_output_mb: number;
}

export interface AuthConfig {
  enabled: boolean;
  api_key?: string;
  api_key_file?: string;
  admin_api_key?: string;
  admin_api_key_file?: string;
  admin_fallback_enabled: boolean;
  enforce_ownership: boolean;
  admin_audit_retention: string;
  worker_token?: string;
  worker_token_file?: string;
  /** worker id → token; a worker with an entry accepts only that token. */
  worker_tokens: Record<string, string>;
  worker_signing_key?: string;
  worker_signing_key_file?: string;
  /** Extra verification keys accepted during rotation. */
  worker_signing_keys: string[];
  worker_revoked_token_ids: string[];
  /** Encrypts secret values at rest (DESIGN.md §15); a lone SQLite node generates one into its data dir. */
  secrets_key?: string;
  secrets_key_file?: string;
}

export interface RateLimitConfig {
  enabled: boolean;
  requests_per_minute: number;
  burst: number;
  key_by: 'owner' | 'api_key' | 'ip';
  bucket_ttl: string;
  cleanup_interval: string;
}

export interface ProvidersConfig {
  default: ProviderChoice;
  docker: {
    /** true: always run (unhealthy when no engine answers); false: never; unset: when an engine answers. */
    enabled?: boolean;
    /** Explicit unix socket; empty = not set (then host, DOCKER_HOST, the docker context, the default socket). */
    socket_path: string;
    /** Explicit engine address as in DOCKER_HOST (`unix://…`, `tcp://…`); empty = not set. */
    host: string;
    runtime: string;
    network_mode: string;
    /** Port of the egress gateway on the filtered network's gateway address (DESIGN §10). */
    egress_port: number;
    /** PEM CA certificates an intercepted upstream may also be signed by, besides the host's trust store (DESIGN §15); '' = none. */
    egress_ca_file: string;
    pids_limit: number;
    added_caps: string[];
    seccomp_profile: string;
    read_only_rootfs: boolean;
    user: string;
    registry_auth?: RegistryAuth;
    /** sbx-agent in each container (DESIGN §11): `auto` when its binary exists and the engine is local; `off` = engine exec only. */
    agent: 'auto' | 'off';
  };
  /** allow_unisolated: run proot even where no PID namespace can be made (sandboxes then see host processes). */
  /** enabled — true: always run; false: never; unset: when the binary and rootfs are usable. */
  proot: { enabled?: boolean; binary: string; rootfs: string; allow_unisolated: boolean };
  /** enabled: register mock (commands on the host, no isolation) beside the default; `auto` never picks it. */
  mock: { root_dir: string; enabled: boolean };
  /** An E2B-compatible hosted-sandbox service (DESIGN §12; docs/providers/hosted.md). */
  hosted: { enabled?: boolean; base_url?: string; api_key?: string; api_key_file?: string; template?: string };
  /** Firecracker microVMs (DESIGN §12; docs/providers/firecracker.md). */
  firecracker: { enabled?: boolean; binary: string; kernel_path: string; rootfs_path: string; data_dir: string };
  /**
   * A backend of the custom HTTP contract (docs/providers/custom-http.md). enabled — true: run it
   * beside the default; unset or false: only when it is `providers.default`. `timeout` bounds each
   * call's connect, headers and body waits.
   */
  custom_http: { enabled?: boolean; base_url?: string; api_key?: string; api_key_file?: string; timeout: string };
}

export interface PoolConfig {
  enabled: boolean;
  max_vms: number;
  max_users_per_vm: number;
  image?: string;
  memory_mb?: number;
  vcpus?: number;
  /** Provider of the shared runtimes; unset = the default provider. */
  provider?: string;
}

export interface RpcTlsConfig {
  enabled: boolean;
  server_cert_file?: string;
  server_key_file?: string;
  client_ca_file?: string;
  ca_file?: string;
  client_cert_file?: string;
  client_key_file?: string;
  server_name?: string;
  insecure_skip_verify: boolean;
}

export interface WorkerConfig {
  id?: string;
  control_plane_url?: string;
  listen_addr?: string;
  advertise_url?: string;
  preview_domain?: string;
  heartbeat_interval: string;
  /** The worker's own SQLite state (lease generations, runtime ids); '' = `~/.sbx/worker-<id>.db`. */
  state_path: string;
  rpc_tls: RpcTlsConfig;
}

export interface DatabaseConfig {
  driver: 'sqlite' | 'postgres';
  /** SQLite file; `~` is expanded against the home directory on load. */
  path: string;
  dsn?: string;
  dsn_file?: string;
}

export interface LoggingConfig {
  level: LogLevel;
  format: 'auto' | 'json' | 'pretty';
}

/** The whole sbx configuration (DESIGN.md §3 "Config"). */
export interface SbxConfig {
  server: ServerConfig;
  defaults: DefaultsConfig;
  auth: AuthConfig;
  rate_limit: RateLimitConfig;
  providers: ProvidersConfig;
  pool: PoolConfig;
  worker: WorkerConfig;
  database: DatabaseConfig;
  logging: LoggingConfig;
}

/** Every key optional, recursively; arrays and maps are replaced whole. */
export type DeepPartial<T> = {
  [K in keyof T]?: T[K] extends readonly unknown[]
    ? T[K]
    : T[K] extends object
      ? string extends keyof T[K]
        ? T[K]
        : DeepPartial<T[K]>
      : T[K];
};
