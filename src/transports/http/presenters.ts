import { formatDuration } from '../../shared/duration.js';
import { withoutCredentials } from '../../core/url-credentials.js';
import type { SandboxRecord, TemplateRecord, WorkerRecord } from '../../core/ports/index.js';
import type { Sandbox } from '../../contracts/sandboxes.js';
import type { Template } from '../../contracts/templates.js';
import type { Worker } from '../../contracts/system.js';
import { ownerVisible, type Caller } from '../../core/sandboxes/caller.js';
import type { HttpDeps } from './deps.js';

/**
 * Sandbox responses for one caller: each with its preview domain (its worker's for a remote-owned
 * sandbox, spec 2.1) and, with `server.preview_auth`, its preview token for owner and admins.
 */
export async function presentSandboxes(deps: HttpDeps, caller: Caller, recs: readonly SandboxRecord[]): Promise<Sandbox[]> {
  const preview = deps.preview?.service;
  if (!preview) return recs.map((r) => presentSandbox(r, deps.settings.preview_domain, undefined, ownerVisible(r.owner_id, caller)));
  const domainOf = await preview.domains(recs);
  return recs.map((r) => presentSandbox(r, domainOf(r), preview.tokenFor(r, caller), ownerVisible(r.owner_id, caller)));
}

/** One sandbox response (see presentSandboxes). */
export async function presentOne(deps: HttpDeps, caller: Caller, rec: SandboxRecord): Promise<Sandbox> {
  return (await presentSandboxes(deps, caller, [rec]))[0]!;
}

/** Sandbox response (spec 2.1); internal routing fields stay inside. */
export function presentSandbox(rec: SandboxRecord, previewDomain: string, previewToken?: string, showEgress = false): Sandbox {
  const out: Sandbox = {
    id: rec.id,
    state: rec.state,
    provider: rec.provider,
    image: rec.image,
    memory_mb: rec.memory_mb,
    vcpus: rec.vcpus,
    created_at: rec.created_at,
    expires_at: rec.expires_at,
    metadata: rec.metadata,
    preview_domain: previewDomain,
    worker_id: rec.worker_id,
  };
  if (rec.owner_id) out.owner_id = rec.owner_id;
  if (rec.template) out.template = rec.template;
  if (rec.network) out.network = rec.network;
  if (rec.snapshot) out.snapshot = rec.snapshot;
  if (rec.forked_from) out.forked_from = rec.forked_from;
  if (rec.volumes && rec.volumes.length > 0) out.volumes = rec.volumes;
  if (rec.auto_pause_ms) out.auto_pause = formatDuration(rec.auto_pause_ms);
  if (rec.on_expire === 'pause') {
    out.on_expire = 'pause';
    if (rec.pause_at) out.pause_at = rec.pause_at;
  }
  if (previewToken) out.preview_token = previewToken;
  // DESIGN.md §10: the rules of a filtered sandbox are its owner's and the admins' to see.
  if (showEgress && rec.network === 'filtered' && rec.egress) out.egress = { allow: [...rec.egress.allow], deny: [...rec.egress.deny] };
  return out;
}

/** Template response (DESIGN.md §3): every field present, `null` where the template does not set it. */
export function presentTemplate(rec: TemplateRecord): Template {
  return {
    name: rec.name,
    image: rec.image,
    memory_mb: rec.memory_mb,
    vcpus: rec.vcpus,
    ttl: rec.ttl,
    provider: rec.provider,
    metadata: rec.metadata,
    network: rec.network ?? null,
    snapshot: rec.snapshot ?? null,
    volumes: rec.volumes && rec.volumes.length > 0 ? rec.volumes : null,
    warm: rec.warm ?? null,
    egress: rec.egress ? { allow: [...rec.egress.allow], deny: [...rec.egress.deny] } : null,
    secrets: rec.secrets?.length ? [...rec.secrets] : null,
    auto_pause: rec.auto_pause ?? null,
    on_expire: rec.on_expire ?? null,
    created_at: rec.created_at,
    updated_at: rec.updated_at,
  };
}

/**
 * Worker response (spec 2.9), the only way a worker leaves the API (list, get, heartbeat replies,
 * diagnostics). A worker reports its own `rpc_url`, which may carry credentials in user-info, query
 * or fragment; any user key can read workers, so those parts never leave. The store keeps the URL
 * as reported, since the control plane calls it.
 */
export function presentWorker(rec: WorkerRecord, staleAfterMs: number, now: Date): Worker {
  const out: Worker = { ...rec, stale: now.getTime() - Date.parse(rec.last_heartbeat) > staleAfterMs };
  const url = rec.capacity.rpc_url;
  if (url !== undefined) out.capacity = { ...rec.capacity, rpc_url: withoutCredentials(url) };
  return out;
}
