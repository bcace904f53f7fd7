import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import {
  E2B_ENVD_VERSION,
  type E2bListedSandbox,
  type E2bNewSandbox,
  type E2bSandbox,
  type E2bSandboxDetail,
} from '../../contracts/e2b.js';
import { accessTokenOf } from '../../core/auth/access-token.js';
import { badRequest } from '../../core/errors.js';
import type { SandboxRecord } from '../../core/ports/index.js';
import type { SpawnInput } from '../../core/sandboxes/spawn-request.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import type { E2bDeps } from './deps.js';
import { networkChoiceOf } from './network.js';

/** E2B's name for "the server's default template" (DESIGN.md §14): a spawn with the server defaults. */
export const DEFAULT_TEMPLATE = 'base';

/**
 * The domain the SDK builds sandbox hosts under: `server.preview_domain`, else `localhost:<port>` of
 * this listener. Never null: an SDK given no domain sends traffic to E2B's public hosts.
 */
export function domainFor(deps: E2bDeps, request: FastifyRequest): string {
  const configured = deps.settings.preview_domain;
  return configured !== '' ? configured : `localhost:${request.socket.localPort ?? 7423}`;
}

/**
 * Whether a sandbox made through `/e2b` gets an envd access token (DESIGN.md §14): always when
 * auth, ownership or pool mode is on, whatever `secure` says; else only with `secure: true`.
 */
export function needsAccessToken(deps: E2bDeps, secure: boolean | undefined): boolean {
  return deps.auth.enabled || deps.settings.enforce_ownership || deps.settings.pool.enabled || secure === true;
}

/**
 * E2B's create body → sbx's spawn input. What sbx cannot honour is refused with 400 (what E2B
 * answers for an option it does not take), never silently dropped: `autoPauseMemory`, `mcp`, `iam`
 * and the network options `networkChoiceOf` refuses. `volumeMounts` mount sbx volumes (DESIGN.md §10).
 */
export async function spawnInputOf(deps: E2bDeps, body: E2bNewSandbox, caller: Caller): Promise<SpawnInput> {
  if (body.autoPauseMemory !== undefined) throw badRequest('autoPauseMemory is not supported by this server');
  if (body.mcp != null) throw badRequest('mcp is not supported by this server');
  if (body.iam !== undefined) throw badRequest('iam is not supported by this server');
  const input: SpawnInput = { owner_id: caller.owner_id };
  if (body.timeout !== undefined) input.ttl = `${body.timeout}s`;
  // E2B's autoPause: paused instead of killed at the timeout (DESIGN.md §16 `on_expire: pause`). A
  // paused sandbox is resumed by its next command or file call whatever `autoResume` says.
  if (body.autoPause === true) input.on_expire = 'pause';
  if (body.metadata !== undefined) input.metadata = body.metadata;
  if (body.envVars !== undefined) input.env = body.envVars;
  if (body.volumeMounts !== undefined && body.volumeMounts.length > 0)
    input.volumes = body.volumeMounts.map((v) => ({ name: v.name, mount_path: v.path }));
  const net = await networkChoiceOf(deps, caller, body.network, body.allow_internet_access);
  if (net.network !== undefined) input.network = net.network;
  if (net.egress !== undefined) input.egress = net.egress;
  if (net.secrets !== undefined) input.secrets = net.secrets;
  if (needsAccessToken(deps, body.secure)) input.access_token_seed = randomBytes(16).toString('hex');
  return input;
}

/** The template a create names, or null for the server defaults (`base` or none). */
export function templateOf(body: E2bNewSandbox): string | null {
  const t = body.templateID;
  return t === undefined || t === DEFAULT_TEMPLATE ? null : t;
}

/** The envd access token of a sandbox, when it has one (derived, never stored). */
export function accessTokenFor(deps: E2bDeps, rec: SandboxRecord): string | undefined {
  return rec.access_token_seed ? accessTokenOf(deps.installationSecret, rec.id, rec.access_token_seed) : undefined;
}

/** E2B's Sandbox (create, connect, resume answers). */
export function presentE2bSandbox(deps: E2bDeps, request: FastifyRequest, rec: SandboxRecord): E2bSandbox {
  const token = accessTokenFor(deps, rec);
  return {
    templateID: rec.template ?? DEFAULT_TEMPLATE,
    sandboxID: rec.id,
    ...(rec.template ? { alias: rec.template } : {}),
    clientID: rec.worker_id,
    envdVersion: E2B_ENVD_VERSION,
    ...(token ? { envdAccessToken: token } : {}),
    trafficAccessToken: null,
    domain: domainFor(deps, request),
  };
}

/** E2B's ListedSandbox: a paused sbx sandbox is E2B's `paused` (DESIGN.md §16), every other live state `running`. */
export function presentListed(rec: SandboxRecord): E2bListedSandbox {
  return {
    templateID: rec.template ?? DEFAULT_TEMPLATE,
    ...(rec.template ? { alias: rec.template } : {}),
    sandboxID: rec.id,
    clientID: rec.worker_id,
    startedAt: rec.created_at,
    endAt: rec.expires_at,
    cpuCount: rec.vcpus,
    memoryMB: rec.memory_mb,
    // sbx does not size disks: 0 is "not set", which E2B's schema allows.
    diskSizeMB: 0,
    metadata: rec.metadata,
    state: rec.state === 'paused' ? 'paused' : 'running',
    envdVersion: E2B_ENVD_VERSION,
    volumeMounts: (rec.volumes ?? []).map((v) => ({ name: v.name, path: v.mount_path })),
  };
}

/**
 * E2B's SandboxDetail. The access token is not repeated here: `connect` hands it out to the owner.
 * A filtered sandbox's egress rules appear only to its owner and admins, as on the native API.
 */
export function presentDetail(deps: E2bDeps, request: FastifyRequest, rec: SandboxRecord, caller: Caller): E2bSandboxDetail {
  const onTimeout = rec.on_expire === 'pause' ? 'pause' : 'kill';
  const out: E2bSandboxDetail = { ...presentListed(rec), domain: domainFor(deps, request), lifecycle: { autoResume: false, onTimeout } };
  if (rec.network === 'none') out.allowInternetAccess = false;
  if (rec.network === 'filtered' && rec.egress && (caller.admin || caller.owner_id === rec.owner_id))
    out.network = { allowOut: [...rec.egress.allow], denyOut: ['0.0.0.0/0', ...rec.egress.deny] };
  return out;
}

/**
 * The `metadata` filter as the SDK sends it: a URL-encoded `key=value&…` string whose keys and
 * values were URL-encoded once more. Malformed → 400.
 */
export function parseMetadataFilter(raw: string | undefined): Array<[string, string]> {
  if (raw === undefined || raw === '') return [];
  const pairs: Array<[string, string]> = [];
  try {
    for (const [k, v] of new URLSearchParams(raw)) pairs.push([decodeURIComponent(k), decodeURIComponent(v)]);
  } catch {
    throw badRequest('metadata must be a URL-encoded key=value list');
  }
  return pairs;
}

export function matchesMetadata(rec: SandboxRecord, filter: ReadonlyArray<[string, string]>): boolean {
  return filter.every(([k, v]) => Object.hasOwn(rec.metadata, k) && rec.metadata[k] === v);
}

/** The `state` filter (`running`, `paused`, comma-separated); absent = both. Unknown state → 400. */
export function parseStateFilter(raw: string | undefined): { running: boolean; paused: boolean } {
  if (raw === undefined || raw.trim() === '') return { running: true, paused: true };
  const out = { running: false, paused: false };
  for (const s of raw.split(',')) {
    const v = s.trim();
    if (v === 'running') out.running = true;
    else if (v === 'paused') out.paused = true;
    else throw badRequest(`state must be running or paused, not ${JSON.stringify(v.slice(0, 32))}`);
  }
  return out;
}
