import { existsSync, readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sbxPackage } from '../../../package-root.js';

export type { DockerEndpoint, DockerTls } from '../../../shared/docker-endpoint.js';
import type { DockerEndpoint } from '../../../shared/docker-endpoint.js';

/** Progress of an image pull, as reported to `onPull`. */
export interface PullEvent {
  image: string;
  status: string;
  progress?: string;
}

export interface DockerProviderOptions {
  /** Where the engine is (see resolveDockerEndpoint); wins over `socketPath`. */
  endpoint?: DockerEndpoint;
  /** Engine socket when no `endpoint` is given; default `/var/run/docker.sock`. */
  socketPath?: string;
  /** Label value that marks containers as ours (reconciliation only ever touches these). */
  installationId: string;
  /** OCI runtime: `runc` (engine default), `runsc`, `kata-runtime`, … */
  runtime?: string;
  /** `bridge` (default), `none`, or a user-defined network. */
  networkMode?: string;
  /** Default 256. */
  pidsLimit?: number;
  /** Capabilities added back after `CapDrop: ALL`. */
  addedCaps?: string[];
  /** Seccomp profile: a file path, inline JSON or `unconfined`; engine default when absent. */
  seccompProfile?: string;
  /** Read-only root filesystem with tmpfs on /tmp and /workspace. */
  readOnlyRootfs?: boolean;
  /**
   * Numeric `uid` or `uid:gid` the sandbox runs as. Numeric because /workspace must be made the
   * user's before the container exists (tmpfs options, tar headers); names would need the image's
   * passwd file. Without a gid, /workspace and files written through the API get group 0.
   */
  user?: string;
  onPull?: (event: PullEvent) => void;
  /**
   * Registry credentials, never logged or reported: an object (`username`, `password`,
   * `serveraddress`, or `identitytoken`), its JSON text, or a ready X-Registry-Auth base64 value.
   */
  registryAuth?: unknown;
  /** Bound on one image pull; default 10 minutes. */
  pullTimeoutMs?: number;
  /** sbx-agent (DESIGN §11): `auto` (default) when the binary exists, the engine is on this host and the runtime is runc or crun; `off`. */
  agent?: 'auto' | 'off';
  /** The agent binary; default the one the package build made (dist/agent/). */
  agentBinary?: string;
  /** Host directory for the per-container agent socket directories; default under the temp directory. */
  agentDir?: string;
}

/** Options with defaults applied and the seccomp profile resolved to what the engine expects. */
export interface ResolvedOptions {
  endpoint: DockerEndpoint;
  installationId: string;
  runtime: string | undefined;
  networkMode: string;
  pidsLimit: number;
  addedCaps: string[];
  /** `seccomp=<json or unconfined>` security option, when configured. */
  seccompOpt: string | undefined;
  readOnlyRootfs: boolean;
  user: ContainerUser | undefined;
  onPull: ((event: PullEvent) => void) | undefined;
  /** dockerode `authconfig`, or undefined. */
  registryAuth: Record<string, unknown> | undefined;
  pullTimeoutMs: number;
  /** The agent's binary and state directory when the agent is in use. */
  agent: { binary: string; stateDir: string } | undefined;
}

/** The configured non-default user: the engine's `User` value and the ids it stands for. */
export interface ContainerUser {
  /** As given (`65534` or `1000:1000`), for the container's `User`. */
  spec: string;
  uid: number;
  /** Undefined when only a uid was given: the runtime then takes the group from the image. */
  gid: number | undefined;
}

export const DEFAULT_PIDS_LIMIT = 256;
export const WORKDIR = '/workspace';

/** Applies defaults; reads a seccomp profile file once, at construction. */
export function resolveOptions(opts: DockerProviderOptions): ResolvedOptions {
  if (!opts.installationId) throw new Error('docker provider: installationId is required');
  return {
    endpoint: opts.endpoint ?? {
      kind: 'unix',
      socketPath: opts.socketPath || '/var/run/docker.sock',
      source: 'socket path',
      description: `unix://${opts.socketPath || '/var/run/docker.sock'}`,
    },
    installationId: opts.installationId,
    runtime: opts.runtime || undefined,
    networkMode: opts.networkMode || 'bridge',
    pidsLimit: opts.pidsLimit && opts.pidsLimit > 0 ? opts.pidsLimit : DEFAULT_PIDS_LIMIT,
    addedCaps: [...(opts.addedCaps ?? [])],
    seccompOpt: seccompOption(opts.seccompProfile),
    readOnlyRootfs: opts.readOnlyRootfs ?? false,
    user: parseUser(opts.user),
    onPull: opts.onPull,
    registryAuth: authConfig(opts.registryAuth),
    pullTimeoutMs: opts.pullTimeoutMs ?? 10 * 60_000,
    agent: agentSettings(opts),
  };
}

/** Where the package build puts the agent: dist/agent/ of the package (from src/, dist/ or the bundled CLI). */
export function defaultAgentBinary(): string | undefined {
  const path = join(sbxPackage().root, 'dist', 'agent', `sbx-agent-linux-${process.arch}`);
  return existsSync(path) ? path : undefined;
}

/**
 * The agent is used with `auto` when its binary exists and the engine is a local unix socket (the
 * binary and socket directory are bind-mounted from this host's filesystem).
 */
function agentSettings(opts: DockerProviderOptions): ResolvedOptions['agent'] {
  if (opts.agent === 'off' || process.platform !== 'linux') return undefined;
  const endpoint = opts.endpoint;
  if (endpoint && endpoint.kind !== 'unix') return undefined;
  // runc and crun share the host's view of a bind-mounted socket; gVisor and VM runtimes do not.
  if (opts.runtime && !['runc', 'crun'].includes(opts.runtime)) return undefined;
  const binary = opts.agentBinary ?? defaultAgentBinary();
  if (!binary || !existsSync(binary)) return undefined;
  return { binary, stateDir: opts.agentDir ?? join(tmpdir(), `sbx-agent-${opts.installationId}`) };
}

const UID_GID = /^(\d{1,10})(?::(\d{1,10}))?$/;
const MAX_ID = 2 ** 32 - 2; // (uid_t)-1 means "no change" to the kernel

/** Parses `uid` or `uid:gid`; anything else (a user name included) is a startup error. */
export function parseUser(user: string | undefined): ContainerUser | undefined {
  const spec = user?.trim();
  if (!spec) return undefined;
  const m = UID_GID.exec(spec);
  const uid = Number(m?.[1]);
  const gid = m?.[2] === undefined ? undefined : Number(m[2]);
  if (!m || uid > MAX_ID || (gid !== undefined && gid > MAX_ID)) {
    throw new Error(`docker provider: user must be a numeric uid or uid:gid such as 65534 or 1000:1000, got ${JSON.stringify(spec)}`);
  }
  return { spec, uid, gid };
}

// The engine API takes the profile's JSON text, not a path (the docker CLI reads the file itself).
function seccompOption(profile: string | undefined): string | undefined {
  if (!profile) return undefined;
  const p = profile.trim();
  if (p === 'unconfined' || p.startsWith('{')) return `seccomp=${p}`;
  const text = readFileSync(p, 'utf8');
  JSON.parse(text); // fail at startup, not at the first spawn
  return `seccomp=${text}`;
}

// docker-modem sends `authconfig.base64` verbatim as X-Registry-Auth and JSON-encodes anything else.
function authConfig(auth: unknown): Record<string, unknown> | undefined {
  if (auth === undefined || auth === null || auth === '') return undefined;
  if (typeof auth === 'string') {
    const t = auth.trim();
    if (t.startsWith('{')) {
      try {
        return JSON.parse(t) as Record<string, unknown>;
      } catch {
        throw new Error('docker provider: registry auth is neither valid JSON nor a base64 value');
      }
    }
    return { base64: t };
  }
  if (typeof auth === 'object') return { ...(auth as Record<string, unknown>) };
  throw new Error('docker provider: registry auth must be an object or a string');
}

/**
 * dockerode options for an endpoint. Every connection field is set, even to undefined: docker-modem
 * fills missing ones from DOCKER_HOST/DOCKER_CERT_PATH of this process, which must not override
 * the endpoint chosen.
 */
export function dockerodeOptions(endpoint: DockerEndpoint, extra: { timeout?: number } = {}): Record<string, unknown> {
  const base = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    protocol: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    agent: undefined,
    ...extra,
  };
  if (endpoint.kind === 'unix') return { ...base, socketPath: endpoint.socketPath, protocol: 'http' };
  const { tls } = endpoint;
  if (!tls) return { ...base, host: endpoint.host, port: endpoint.port, protocol: 'http' };
  const pem = { ca: tls.ca, cert: tls.cert, key: tls.key };
  // Without verification the agent carries rejectUnauthorized; docker-modem has no option for it.
  const agent = tls.verify ? undefined : new Agent({ ...pem, rejectUnauthorized: false, keepAlive: false });
  return { ...base, host: endpoint.host, port: endpoint.port, protocol: 'https', ...pem, agent };
}
