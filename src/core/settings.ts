/**
 * What core needs to know of the configuration, already parsed (durations in ms).
 * compose/ derives it from the validated config.
 */
export interface CoreSettings {
  version: string;
  /** This node's worker id (`local` in single-node mode). */
  worker_id: string;
  hostname: string;
  preview_domain: string;
  default_provider: string;
  defaults: {
    image: string;
    memory_mb: number;
    vcpus: number;
    ttl_ms: number;
    max_ttl_ms: number;
    /** 0 = no default timeout. */
    default_exec_timeout_ms: number;
    /** 0 = no maximum. */
    max_exec_timeout_ms: number;
    /** 0 = unlimited. */
    max_sandboxes: number;
    /** 0 = unlimited. */
    max_sandboxes_per_owner: number;
    spawn_overflow: 'reject' | 'queue';
    spawn_queue_timeout_ms: number;
    max_spawn_queue: number;
    /** Network of spawns that name none; '' = the provider's default. */
    network?: string;
    /** Egress lists of spawns that get `filtered` from `network` (DESIGN.md §10). */
    egress?: { allow: string[]; deny: string[] };
    /** Warm runtimes for the default shape (DESIGN.md §11); 0 = none. */
    warm?: number;
    warm_destroy_on_shutdown?: boolean;
    /** Auto-pause of spawns that name none (DESIGN.md §16), ms; 0/absent = never. */
    auto_pause_ms?: number;
    /** Life of a sandbox paused by `on_expire: pause` before it is destroyed, ms; absent = 24h. */
    paused_ttl_ms?: number;
  };
  limits: {
    /** Largest file accepted on write / returned on read, bytes. */
    max_file_bytes: number;
    /** Buffered exec keeps at most this many bytes per stream; the rest is dropped with a marker. */
    max_exec_output_bytes: number;
  };
  /** Pool mode (DESIGN §8), with its defaults applied (max_vms 0 → 4, max_users_per_vm 0 → 8). */
  pool: PoolSettings;
  /** Pool mode or auth.enforce_ownership: sandboxes with an owner are private to it. */
  enforce_ownership: boolean;
}

/** Pool mode (DESIGN.md §8): shared runtimes and the shape of their tenants. */
export interface PoolSettings {
  enabled: boolean;
  max_vms: number;
  max_users_per_vm: number;
  image: string;
  memory_mb: number;
  vcpus: number;
  /** The provider runtimes are made on. */
  provider: string;
}
