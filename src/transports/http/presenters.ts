import type { SandboxRecord, TemplateRecord, WorkerRecord } from '../../core/ports.js';
import type { Sandbox } from '../../contracts/sandboxes.js';
import type { Template } from '../../contracts/templates.js';
import type { Worker } from '../../contracts/system.js';

/** Sandbox response (spec 2.1); internal routing fields stay inside. */
export function presentSandbox(rec: SandboxRecord, previewDomain: string): Sandbox {
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
  };
  if (rec.owner_id) out.owner_id = rec.owner_id;
  if (rec.template) out.template = rec.template;
  return out;
}

export function presentTemplate(rec: TemplateRecord): Template {
  return { ...rec };
}

export function presentWorker(rec: WorkerRecord, staleAfterMs: number, now: Date): Worker {
  return { ...rec, stale: now.getTime() - Date.parse(rec.last_heartbeat) > staleAfterMs };
}
