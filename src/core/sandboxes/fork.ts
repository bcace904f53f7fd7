/**
 * Fork (DESIGN.md §16): `count` new sandboxes, each a copy of a running sandbox's filesystem at
 * one moment — same owner, provider, shape, network, egress rules, environment, volumes (mounted
 * the same way) and secret bindings (new placeholders), on the parent's node. Running processes
 * are not carried (memory checkpoints need CRIU).
 *
 * One request, one fork image: the parent's provider copies its filesystem once (held frozen
 * around the copy where the provider can freeze it), then each fork is an ordinary spawn from that
 * copy through spawn.ts (placement pinned to the parent's worker, lease, record, events). Admission
 * applies to each fork and is all or nothing: every slot is taken before anything is made, and a
 * fork that fails takes the ones already made with it. The fork image is reference-counted by the
 * forks' records (`fork`) and removed when its last fork is destroyed; reconciliation removes the
 * ones no live record names (reconcile-catalog.ts).
 */
import { parseDuration } from '../duration.js';
import { badRequest, notFound, SbxError } from '../errors.js';
import type { AdmissionTicket } from '../admission/admission.js';
import type { Provider, SandboxRecord } from '../ports/index.js';
import type { Caller } from './caller.js';
import type { SandboxDeps } from './deps.js';
import type { Teardown } from './pause.js';
import type { ResolveRuntime } from './runtimes.js';
import { cannot } from './snapshots.js';
import { createSandbox } from './spawn.js';
import type { ResolvedSpawn } from './spawn-request.js';
import type { VolumeService } from './volumes.js';

/** At most this many forks per request. */
export const MAX_FORKS = 10;
/** Bound on removing a fork image nobody uses any more. */
const DELETE_TIMEOUT_MS = 60_000;
/** Bound on thawing the parent after its copy (the fork's own signal may have ended meanwhile). */
const THAW_TIMEOUT_MS = 30_000;

export interface ForkInput {
  /** 1–10, default 1. */
  count?: number;
  /** The forks' TTL; default the server's. */
  ttl?: string;
  /** The forks' metadata; default the parent's. */
  metadata?: Record<string, string>;
}

/** A provider that can hold a runtime still (DESIGN.md §16 pause: docker's engine pause, the cgroup freezer). */
interface Freezable {
  pause?(runtimeId: string, signal?: AbortSignal): Promise<unknown>;
  resume?(runtimeId: string, signal?: AbortSignal): Promise<unknown>;
}

/**
 * Runs `work` with the runtime frozen when its provider can pause it (`pause`/`resume` on the
 * port), so the copy is of one moment and a process inside cannot change the tree under it; a
 * provider without them copies a live tree (docker's commit pauses by itself). A sandbox its owner
 * paused stays paused: it is neither frozen again nor thawed here.
 */
export async function frozenDuring<T>(rec: SandboxRecord, provider: Provider, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const p = provider as Provider & Freezable;
  const runtimeId = rec.runtime_id;
  if (!p.pause || !p.resume || runtimeId === null || (rec.state as string) === 'paused') return work();
  await p.pause(runtimeId, signal);
  try {
    return await work();
  } finally {
    await p.resume(runtimeId, AbortSignal.timeout(THAW_TIMEOUT_MS)).catch(() => undefined);
  }
}

/** The count of a fork request: an integer 1–10 (400 otherwise). */
export function checkForkCount(count: unknown): number {
  if (count === undefined) return 1;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_FORKS)
    throw badRequest(`count must be an integer from 1 to ${MAX_FORKS}`);
  return count;
}

export class ForkService {
  /** Fork images being made by this process: never removed as unused while their forks are still coming. */
  private readonly making = new Set<string>();

  constructor(
    private readonly deps: SandboxDeps,
    /** The running parent, with its provider. */
    private readonly resolveRuntime: ResolveRuntime,
    /** Holds the parent's volumes while its forks are made. */
    private readonly volumes: Pick<VolumeService, 'hold'>,
    private readonly teardown: Teardown,
  ) {}

  /** Forks the sandbox `count` times; answers the forks in creation order, or makes none. */
  async fork(parentId: string, input: ForkInput, caller: Caller, signal?: AbortSignal): Promise<SandboxRecord[]> {
    const count = checkForkCount(input.count);
    const { deps } = this;
    // Ownership and liveness as for every sandbox operation (404 for another tenant's).
    const { rec } = await this.resolveRuntime(parentId, caller);
    if (deps.settings.pool.enabled) throw cannot(rec.provider, 'fork pool sandboxes', 'they share one runtime with other users');
    const provider = await deps.locator.provider(rec);
    if (!provider.forkImage) throw cannot(rec.provider, 'fork sandboxes');
    const req = this.forkRequest(rec, input);
    const unhold = this.volumes.hold(req.volumes);
    const tickets: AdmissionTicket[] = [];
    try {
      // Every fork's slot before anything is made: count 3 with room for 2 makes none.
      for (let i = 0; i < count; i++) tickets.push(await deps.admission.admit({ owner_id: req.owner_id, ttl_ms: req.ttl_ms }, signal));
      return await this.make(rec, provider, req, tickets, signal);
    } finally {
      for (const t of tickets) t.release();
      unhold();
    }
  }

  /** The forks of one request again from its first fork's id (an idempotent retry's answer), or null. */
  async replay(firstId: string): Promise<SandboxRecord[] | null> {
    const first = await this.deps.store.getSandbox(firstId);
    if (!first?.fork) return null;
    return this.deps.store.sandboxesOfFork(first.fork);
  }

  /**
   * After a fork is destroyed: its fork image goes when no other record started from it is still
   * alive (and this process is not making forks from it). Failures are left to reconciliation.
   */
  async released(rec: SandboxRecord): Promise<void> {
    if (!rec.fork || this.making.has(rec.fork)) return;
    await this.dropIfUnused(await this.holderOf(rec), rec.fork);
  }

  /** Removes fork image `name` from `holder` when no sandbox started from it is still alive. */
  private async dropIfUnused(holder: Provider, name: string): Promise<void> {
    const users = await this.deps.store.sandboxesOfFork(name);
    if (users.some((u) => u.state !== 'destroyed')) return;
    await holder.deleteForkImage?.(name, AbortSignal.timeout(DELETE_TIMEOUT_MS));
  }

  /** The copy, then one spawn per ticket; on any failure the forks made so far are destroyed again. */
  private async make(
    parent: SandboxRecord,
    provider: Provider,
    req: ResolvedSpawn,
    tickets: AdmissionTicket[],
    signal?: AbortSignal,
  ): Promise<SandboxRecord[]> {
    const { deps } = this;
    const name = forkName(deps.ids.randomId(12));
    this.making.add(name);
    const made: SandboxRecord[] = [];
    let image: string | undefined;
    try {
      image = (await frozenDuring(parent, provider, () => provider.forkImage!(parent.runtime_id!, name, signal), signal)).image;
      const forkReq: ResolvedSpawn = { ...req, fork: { parent, name, image } };
      for (const ticket of tickets) made.push(await createSandbox(deps, forkReq, signal, ticket));
      return made;
    } catch (err) {
      for (const child of made) await this.teardown(child, 'fork_failed').catch(() => undefined);
      throw err;
    } finally {
      this.making.delete(name);
      // A copy no live fork holds (none made, the ones made destroyed again, or destroyed meanwhile) goes now.
      if (image !== undefined) await this.dropIfUnused(provider, name).catch(() => undefined);
    }
  }

  /** The parent's spawn request as its forks repeat it: what the record keeps, pinned to its worker. */
  private forkRequest(rec: SandboxRecord, input: ForkInput): ResolvedSpawn {
    const d = this.deps.settings.defaults;
    const ttl_ms = input.ttl !== undefined ? parseDuration(input.ttl, 'ttl') : d.ttl_ms;
    if (ttl_ms <= 0) throw badRequest('ttl must be positive');
    const metadata = input.metadata ?? rec.metadata;
    for (const [k, v] of Object.entries(metadata)) if (typeof v !== 'string') throw badRequest(`metadata.${k} must be a string`);
    const network = rec.network === 'none' || rec.network === 'bridge' || rec.network === 'filtered' ? rec.network : null;
    return {
      image: rec.image,
      provider: rec.provider,
      memory_mb: rec.memory_mb,
      vcpus: rec.vcpus,
      ttl_ms,
      metadata,
      // Bindings are copied with placeholders of their own by the fork-secrets hook, not planned anew.
      secrets: [],
      // A fork pauses and expires as its parent does (DESIGN.md §16).
      lifecycle: { auto_pause_ms: rec.auto_pause_ms ?? null, on_expire: rec.on_expire === 'pause' ? 'pause' : 'destroy' },
      owner_id: rec.owner_id,
      template: rec.template,
      network,
      egress: network === 'filtered' ? (rec.egress ?? { allow: [], deny: [] }) : null,
      snapshot: null,
      volumes: rec.volumes ?? [],
      // On the parent's node: its copy is there.
      worker: rec.worker_id,
      env: rec.env ?? {},
      // An envd token is handed out by the E2B plane that made the parent; a fork made here has none.
      access_token_seed: null,
    };
  }

  /** The provider holding a fork image: the forks' provider on their node, or their worker over the RPC. */
  private async holderOf(rec: SandboxRecord): Promise<Provider> {
    const holder = await this.deps.locator.holder(rec, `fork image ${rec.fork}`);
    if (!holder) throw notFound(`worker ${rec.worker_id} that holds fork image ${rec.fork} is not registered`);
    return holder;
  }
}

/** A fork image's name: `fork-` and the random id in lower case, a catalogue name every provider accepts. */
function forkName(random: string): string {
  const tail = random
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')
    .slice(0, 32);
  if (tail.length < 8) throw new SbxError('internal', 'no random id for a fork image');
  return `fork-${tail}`;
}
