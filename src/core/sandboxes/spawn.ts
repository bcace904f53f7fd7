/**
 * Creating one admitted sandbox (spec 3.1 "(none) → running", 4.11 rules 2 and 6): placement picks
 * this node or a worker; a remote spawn holds the sandbox's lease for that worker (TTL + 5 min)
 * before `worker.spawn`, and an RPC failure releases it and creates nothing. The record is stored
 * only once a runtime exists; a store failure tears the runtime down again. Never a half-created
 * sandbox, never a leaked lease.
 */
import { formatDuration } from '../../shared/duration.js';
import { asProviderError, badRequest, isSbxError, SbxError } from '../errors.js';
import { reportProviderFailure } from '../events/failures.js';
import type { AdmissionTicket } from '../admission/admission.js';
import type { Provider, SandboxRecord } from '../ports/index.js';
import type { Target } from '../scheduler/locator.js';
import type { SandboxDeps } from './deps.js';
import type { ResolvedSpawn } from './spawn-request.js';

/** Spawn failures because the chosen worker did not answer: placed once more, elsewhere. */
const SILENT = new WeakSet<object>();

export async function createSandbox(
  deps: SandboxDeps,
  req: ResolvedSpawn,
  signal?: AbortSignal,
  ticket?: AdmissionTicket,
): Promise<SandboxRecord> {
  try {
    return await createOn(deps, req, signal, ticket);
  } catch (err) {
    // The chosen worker did not answer (it is now skipped): placed once more, elsewhere.
    if (!(isSbxError(err) && SILENT.has(err))) throw err;
    try {
      return await createOn(deps, req, signal, ticket);
    } catch (again) {
      // No other worker can take it at all (a filtered spawn's only enforcer was the silent one): its failure says why.
      throw isSbxError(again) && again.code === 'not_implemented' ? err : again;
    }
  }
}

async function createOn(deps: SandboxDeps, req: ResolvedSpawn, signal?: AbortSignal, ticket?: AdmissionTicket): Promise<SandboxRecord> {
  const { clock, locator } = deps;
  // Checked before a runtime exists; the stored expiry is taken again once it runs.
  expiryFrom(clock.now(), req.ttl_ms);
  // Pool sandboxes live in this node's shared runtimes (spec 4.2: workspace scoping is local only).
  const target: Target = deps.settings.pool.enabled
    ? { local: true, worker_id: deps.settings.worker_id }
    : await locator.place({
        provider: req.provider,
        owner_id: req.owner_id,
        ...(req.worker !== null ? { worker_id: req.worker } : {}),
        // Filtered sandboxes go where a gateway enforces their rules: this node or a worker that says it can.
        ...(req.network === 'filtered' ? { capability: `egress:${req.provider}` } : {}),
      });
  // A remote placement holds a slot on its worker until the row is stored or the spawn failed.
  const slot = target.local ? undefined : target.slot;
  try {
    const rec = await createPlaced(deps, req, target, signal, ticket);
    slot?.stored();
    return rec;
  } catch (err) {
    slot?.failed();
    throw err;
  }
}

async function createPlaced(
  deps: SandboxDeps,
  req: ResolvedSpawn,
  target: Target,
  signal?: AbortSignal,
  ticket?: AdmissionTicket,
): Promise<SandboxRecord> {
  const { store, bus, clock, ids, locator } = deps;
  // Egress rules (DESIGN.md §10) are enforced only by a provider of this node that says it can, now.
  if (req.network === 'filtered' && target.local) refuseUnfiltered(deps, req);
  // A warm runtime of this shape (DESIGN.md §11) answers without a provider start; else room is made for a cold one.
  // Filtered sandboxes are never warm: their rules must exist before their first packet.
  // Forks start from their parent's copy, never from a warm runtime.
  const warm = target.local && !deps.settings.pool.enabled && req.network !== 'filtered' && !req.fork ? await deps.warm?.claim(req) : null;
  if (target.local && !warm) await deps.warm?.makeRoom().catch(() => undefined);
  const id = warm ? warm.sandbox_id : ids.sandboxId();
  const workerId = target.local ? target.worker_id : target.worker.id;
  let provider: Provider;
  let leased = false;
  if (target.local) {
    provider = deps.providers.get(req.provider);
  } else {
    await locator.leases.acquire(id, workerId, req.ttl_ms);
    leased = true;
    provider = locator.remoteProvider(target.worker, { id, provider: req.provider, runtime_id: null }, formatDuration(req.ttl_ms));
  }
  const release = async () => {
    if (leased) await locator.leases.release({ id, worker_id: workerId }).catch(() => undefined);
  };

  let runtimeId: string;
  let network: string | null = req.network;
  if (warm) {
    runtimeId = warm.runtime_id;
    network = warm.network ?? network;
  } else {
    try {
      const previewToken = target.local ? undefined : deps.previewToken?.(id);
      // A fork's secret bindings are its parent's, with placeholders of its own (DESIGN.md §15): before it starts.
      if (req.fork) await deps.forkSecrets?.copyBindings(req.fork.parent.id, id, signal);
      const spawned = await provider.spawn(
        {
          sandbox_id: id,
          // A fork starts from its fork image (DESIGN.md §16); its record shows the parent's image.
          image: req.fork ? req.fork.image : req.image,
          ...(req.fork ? { fork: req.fork.name } : {}),
          memory_mb: req.memory_mb,
          vcpus: req.vcpus,
          metadata: req.metadata,
          owner_id: req.owner_id,
          ...(previewToken ? { preview_token: previewToken } : {}),
          ...(req.network ? { network: req.network } : {}),
          ...(req.egress ? { egress: req.egress } : {}),
          ...(req.snapshot !== null ? { snapshot: req.snapshot } : {}),
          ...(req.volumes.length > 0 ? { volumes: req.volumes } : {}),
        },
        signal,
      );
      runtimeId = spawned.runtime_id;
      network = spawned.network ?? network;
    } catch (err) {
      await release();
      if (req.fork) await deps.forkSecrets?.dropBindings(id).catch(() => undefined);
      const e = asProviderError(err, `spawn failed on provider ${req.provider}`);
      if (!target.local && e.code === 'unavailable' && !signal?.aborted) {
        locator.markSilent(workerId);
        SILENT.add(e);
      }
      reportProviderFailure(
        bus,
        { sandbox_id: id, owner_id: req.owner_id, worker_id: workerId, provider: req.provider },
        { operation: 'spawn', code: e.code, message: e.message },
      );
      throw e;
    }
  }
  let rec: SandboxRecord;
  try {
    const now = clock.now();
    // `on_expire: pause` (DESIGN.md §16): paused at the TTL, destroyed `defaults.paused_ttl` later.
    const pauseAtExpiry = req.lifecycle.on_expire === 'pause';
    const pausedTtl = deps.settings.defaults.paused_ttl_ms ?? 24 * 3_600_000;
    rec = {
      id,
      state: 'running',
      provider: req.provider,
      image: req.image,
      memory_mb: req.memory_mb,
      vcpus: req.vcpus,
      created_at: now.toISOString(),
      updated_at: now.toISOString(),
      expires_at: expiryFrom(now, pauseAtExpiry ? req.ttl_ms + pausedTtl : req.ttl_ms),
      metadata: req.metadata,
      owner_id: req.owner_id,
      worker_id: workerId,
      runtime_id: runtimeId,
      template: req.template,
      ...(network ? { network } : {}),
      ...(req.volumes.length > 0 ? { volumes: req.volumes } : {}),
      ...(req.snapshot !== null ? { snapshot: req.snapshot } : {}),
      ...(req.egress ? { egress: req.egress } : {}),
      ...(Object.keys(req.env).length > 0 ? { env: req.env } : {}),
      ...(req.access_token_seed !== null ? { access_token_seed: req.access_token_seed } : {}),
      ...(req.fork ? { forked_from: req.fork.parent.id, fork: req.fork.name } : {}),
      ...(req.lifecycle.auto_pause_ms !== null ? { auto_pause_ms: req.lifecycle.auto_pause_ms } : {}),
      ...(pauseAtExpiry ? { on_expire: 'pause' as const, pause_at: expiryFrom(now, req.ttl_ms), ttl_ms: req.ttl_ms } : {}),
    };
    // Bindings first: the gateway never sees the sandbox without them (DESIGN.md §15).
    if (req.secrets.length > 0) await deps.secrets?.record(id, req.owner_id, req.secrets);
    // The admission slot becomes the stored row in one serialized step (see AdmissionTicket.insert).
    await (ticket ? ticket.insert(rec) : store.insertSandbox(rec));
  } catch (err) {
    // Never leave a runtime nobody knows about.
    const bound = target.local ? provider : locator.remoteProvider(target.worker, { id, provider: req.provider, runtime_id: runtimeId });
    await bound.destroy(runtimeId, AbortSignal.timeout(60_000)).catch(() => undefined);
    await release();
    if (req.fork) await deps.forkSecrets?.dropBindings(id).catch(() => undefined);
    throw err;
  }
  const common = { sandbox_id: id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
  const created = {
    provider: rec.provider,
    image: rec.image,
    template: rec.template,
    ...(rec.forked_from ? { forked_from: rec.forked_from } : {}),
  };
  bus.publish({ type: 'sandbox.created', ...common, data: created });
  bus.publish({ type: 'sandbox.running', ...common, data: { expires_at: rec.expires_at } });
  return rec;
}

/**
 * A filtered spawn on a provider of this node that cannot enforce it → 501 with the reason, before
 * any runtime exists: providers without egress enforcement (proot, mock, custom-http, hosted,
 * firecracker, pool), docker where its conditions fail. (Placement already chose only capable
 * workers; a worker checks again on its side.)
 */
function refuseUnfiltered(deps: SandboxDeps, req: ResolvedSpawn): void {
  const egress = deps.providers.get(req.provider).egress;
  if (!egress)
    throw new SbxError(
      'not_implemented',
      `network "filtered" needs a provider that enforces egress rules (docker); provider ${req.provider} cannot`,
    );
  const why = egress.unavailable();
  if (why !== null) throw new SbxError('not_implemented', `network "filtered" is not available here: ${why}`);
}

/** `now + ttl` as ISO 8601; a TTL no date can hold is the caller's mistake, not a crash. */
export function expiryFrom(now: Date, ttlMs: number): string {
  const at = new Date(now.getTime() + ttlMs);
  if (Number.isNaN(at.getTime())) throw badRequest('ttl is too long: the expiry cannot be represented');
  return at.toISOString();
}
