/**
 * The key schema: one descriptor per configuration key. Validation, env-variable mapping,
 * unknown-key detection and secret redaction are all driven from it, so a key added here is
 * known to every source at once.
 */
import type { SbxConfig } from './types.js';

export type Leaf =
  | { kind: 'string'; nonEmpty?: boolean; secret?: boolean; path?: boolean; twinOf?: string }
  | { kind: 'duration'; positive?: boolean }
  | { kind: 'int'; min: number; max?: number }
  | { kind: 'number'; positive: true }
  | { kind: 'bool' }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'list'; secret?: boolean }
  | { kind: 'map'; secret?: boolean }
  | { kind: 'registry_auth' }
  /** A numeric `uid` or `uid:gid` (a bare YAML number is taken as the uid); empty means unset. */
  | { kind: 'uid_gid' };

export interface Group {
  kind: 'group';
  keys: Record<string, SchemaNode>;
}
export type SchemaNode = Leaf | Group;

// Compile-time tie between the schema and SbxConfig: every key present, none extra, groups where
// the type has nested objects (a string index signature marks a map leaf, not a group).
type NodeFor<V> = V extends readonly unknown[] ? Leaf : V extends object ? (string extends keyof V ? Leaf : TypedGroup<V>) : Leaf;
type Shape<T> = { [K in keyof T]-?: NodeFor<NonNullable<T[K]>> };
interface TypedGroup<T> extends Group {
  keys: Shape<T>;
}

const g = <T>(keys: Shape<NoInfer<T>>): TypedGroup<T> => ({ kind: 'group', keys });
const str = (extra: Omit<Extract<Leaf, { kind: 'string' }>, 'kind'> = {}): Leaf => ({ kind: 'string', ...extra });
const secret = (): Leaf => ({ kind: 'string', secret: true });
const secretFile = (twinOf: string): Leaf => ({ kind: 'string', path: true, twinOf });
const path = (): Leaf => ({ kind: 'string', path: true });
const dur = (positive = false): Leaf => ({ kind: 'duration', positive });
const int = (min: number, max?: number): Leaf => ({ kind: 'int', min, max });
const num = (): Leaf => ({ kind: 'number', positive: true });
const bool = (): Leaf => ({ kind: 'bool' });
const oneOf = (...values: string[]): Leaf => ({ kind: 'enum', values });
const list = (isSecret = false): Leaf => ({ kind: 'list', secret: isSecret });

/** `custom-http` is the other spelling of `custom_http`, accepted and read as it (DESIGN §12). */
export const PROVIDER_CHOICES = ['auto', 'docker', 'proot', 'mock', 'firecracker', 'hosted', 'custom_http', 'custom-http'] as const;
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** The schema of SbxConfig. */
export const SCHEMA: TypedGroup<SbxConfig> = g<SbxConfig>({
  server: g({
    host: str({ nonEmpty: true }),
    port: int(0, 65535),
    preview_domain: str(),
    preview_auth: bool(),
    preview_addr: str(),
    cors_allowed_origins: list(),
    allowed_hosts: list(),
    body_limit_mb: num(),
    max_inflight_mb: num(),
    local_worker: bool(),
    replica_id: str(),
    reaper_interval: dur(true),
    leader_ttl: dur(true),
    advertise_url: str(),
    reconcile_interval: dur(true),
    ui: bool(),
    mcp: bool(),
    e2b: bool(),
  }),
  defaults: g({
    ttl: dur(true),
    image: str({ nonEmpty: true }),
    memory_mb: int(1),
    vcpus: int(1),
    max_ttl: dur(),
    default_exec_timeout: dur(),
    max_exec_timeout: dur(),
    max_sandboxes: int(0),
    max_sandboxes_per_owner: int(0),
    spawn_overflow: oneOf('reject', 'queue'),
    spawn_queue_timeout: dur(true),
    max_spawn_queue: int(0),
    network: oneOf('', 'none', 'bridge', 'filtered'),
    egress: g({ allow: list(), deny: list() }),
    warm: int(0, 64),
    warm_destroy_on_shutdown: bool(),
    auto_pause: dur(),
    paused_ttl: dur(true),
    max_file_mb: num(),
    max_exec_output_mb: num(),
  }),
  auth: g({
    enabled: bool(),
    api_key: secret(),
    api_key_file: secretFile('api_key'),
    admin_api_key: secret(),
    admin_api_key_file: secretFile('admin_api_key'),
    admin_fallback_enabled: bool(),
    enforce_ownership: bool(),
    admin_audit_retention: dur(),
    worker_token: secret(),
    worker_token_file: secretFile('worker_token'),
    worker_tokens: { kind: 'map', secret: true },
    worker_signing_key: secret(),
    worker_signing_key_file: secretFile('worker_signing_key'),
    worker_signing_keys: list(true),
    worker_revoked_token_ids: list(),
    secrets_key: secret(),
    secrets_key_file: secretFile('secrets_key'),
  }),
  rate_limit: g({
    enabled: bool(),
    requests_per_minute: int(1),
    burst: int(1),
    key_by: oneOf('owner', 'api_key', 'ip'),
    bucket_ttl: dur(true),
    cleanup_interval: dur(true),
  }),
  providers: g({
    default: oneOf(...PROVIDER_CHOICES),
    docker: g({
      enabled: bool(),
      socket_path: path(),
      host: str(),
      runtime: str({ nonEmpty: true }),
      network_mode: str({ nonEmpty: true }),
      egress_port: int(1, 65535),
      egress_ca_file: path(),
      pids_limit: int(0),
      added_caps: list(),
      seccomp_profile: str(),
      read_only_rootfs: bool(),
      // Numeric: /workspace is made the user's before the container exists, when no name resolves.
      user: { kind: 'uid_gid' },
      registry_auth: { kind: 'registry_auth' },
      // sbx-agent (DESIGN §11, docs/agent.md): auto = used when its binary was built; off = the engine's exec API.
      agent: oneOf('auto', 'off'),
    }),
    proot: g({ enabled: bool(), binary: str({ nonEmpty: true }), rootfs: path(), allow_unisolated: bool() }),
    mock: g({ root_dir: path(), enabled: bool() }),
    hosted: g({ enabled: bool(), base_url: str(), api_key: secret(), api_key_file: secretFile('api_key'), template: str() }),
    firecracker: g({ enabled: bool(), binary: str({ nonEmpty: true }), kernel_path: path(), rootfs_path: path(), data_dir: path() }),
    custom_http: g({ enabled: bool(), base_url: str(), api_key: secret(), api_key_file: secretFile('api_key'), timeout: dur(true) }),
  }),
  pool: g({
    enabled: bool(),
    max_vms: int(0),
    max_users_per_vm: int(0),
    image: str(),
    memory_mb: int(1),
    vcpus: int(1),
    provider: str(),
  }),
  worker: g({
    id: str(),
    control_plane_url: str(),
    listen_addr: str(),
    advertise_url: str(),
    preview_domain: str(),
    heartbeat_interval: dur(true),
    state_path: path(),
    rpc_tls: g({
      enabled: bool(),
      server_cert_file: path(),
      server_key_file: path(),
      client_ca_file: path(),
      ca_file: path(),
      client_cert_file: path(),
      client_key_file: path(),
      server_name: str(),
      insecure_skip_verify: bool(),
    }),
  }),
  database: g({
    driver: oneOf('sqlite', 'postgres'),
    path: path(),
    dsn: secret(),
    dsn_file: secretFile('dsn'),
  }),
  logging: g({
    level: oneOf(...LOG_LEVELS),
    format: oneOf('auto', 'json', 'pretty'),
  }),
});

export interface LeafEntry {
  path: string[];
  leaf: Leaf;
}

/** Every leaf key with its dotted path, in schema order. */
export function leafEntries(node: Group = SCHEMA, prefix: string[] = []): LeafEntry[] {
  const out: LeafEntry[] = [];
  for (const [key, child] of Object.entries(node.keys)) {
    if (child.kind === 'group') out.push(...leafEntries(child, [...prefix, key]));
    else out.push({ path: [...prefix, key], leaf: child });
  }
  return out;
}

/** True for leaves whose value is a credential (never logged, redacted in diagnostics). */
export function isSecretLeaf(leaf: Leaf): boolean {
  return leaf.kind === 'registry_auth' || ((leaf.kind === 'string' || leaf.kind === 'list' || leaf.kind === 'map') && leaf.secret === true);
}
