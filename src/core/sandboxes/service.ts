import { formatDuration } from '../../shared/duration.js';
import { parseDuration } from '../duration.js';
import { badRequest, conflict, notFound, SbxError } from '../errors.js';
import { parseEgress } from '../network/rules.js';
import type { Provider, SandboxRecord, SandboxStore } from '../ports/index.js';
import { ownershipRule, type Caller } from './caller.js';
import type { ListPosition } from './cursor.js';
import type { SandboxDeps } from './deps.js';
import { ForkService } from './fork.js';
import { GONE, providerNotConfigured, SandboxLookup } from './lookup.js';
import { sandboxPages } from './pages.js';
import { PauseService } from './pause.js';
import { Reaper, type ReapOptions } from './reaper.js';
import { resolveSpawn } from './resolve-spawn.js';
import { RuntimeResolver } from './runtimes.js';
import { SnapshotService } from './snapshots.js';
import { createSandbox } from './spawn.js';
import type { ResolvedSpawn, SpawnInput } from './spawn-request.js';
import { Teardowns } from './teardown.js';
import { VolumeService } from './volumes.js';

/** Bound on a worker's status answer on `GET` (DESIGN.md §7); the cached record is served after it. */
const REMOTE_STATUS_TIMEOUT_MS = 2_000;

/**
 * Sandbox lifecycle (spec 3.1): spawn, get, list, extend, destroy, prune, reap. Every mutation is
 * persisted before the call resolves. A sandbox past `expires_at` is gone for every read at once,
 * whatever the reaper's timing (DESIGN.md §3 "Expiry").
 */
export class SandboxService {
  private readonly teardowns: Teardowns;
  private readonly lookup: SandboxLookup;
  private readonly runtimes: RuntimeResolver;
  private readonly reaper: Reaper;
  /** Snapshots of this service's sandboxes (DESIGN.md §10). */
  readonly snapshots: SnapshotService;
  /** Volumes its sandboxes mount (DESIGN.md §10). */
  readonly volumes: VolumeService;
  /** Forks of its sandboxes (DESIGN.md §16). */
  readonly forks: ForkService;
  /** Pause, resume, auto-pause and the activity that holds it off (DESIGN.md §16). */
  readonly pauses: PauseService;

  /**
   * Composes the children from narrow parts — the lookup (ownership, TTL, teardown under way), the
   * runtime resolver, the teardown — so none of them holds this service.
   */
  constructor(readonly deps: SandboxDeps) {
    const ownerRule = ownershipRule(deps.settings);
    const teardown = (rec: SandboxRecord, reason: string, retry = true) => this.teardowns.run(rec, reason, { retry });
    this.lookup = new SandboxLookup(deps, ownerRule, (id) => this.teardowns.destroying(id));
    this.pauses = new PauseService(deps, this.lookup, teardown);
    this.runtimes = new RuntimeResolver(deps, this.lookup, this.pauses);
    const resolveRuntime = this.runtimes.resolve.bind(this.runtimes);
    this.snapshots = new SnapshotService(deps, resolveRuntime, ownerRule);
    this.volumes = new VolumeService(deps, ownerRule);
    this.forks = new ForkService(deps, resolveRuntime, this.volumes, teardown);
    this.teardowns = new Teardowns(deps, deps.destroyRetry, (rec) => this.forks.released(rec));
    this.reaper = new Reaper(deps, this.lookup, teardown, (rec) => this.pauses.pauseAtExpiry(rec));
  }

  /** True while this process tears the sandbox down: its operations then answer not_found. */
  destroying(id: string): boolean {
    return this.lookup.destroying(id);
  }

  /**
   * Applies defaults, validates sizes, TTL syntax, provider name (one this node or a registered
   * worker runs). Does not check limits.
   */
  async resolveSpawn(input: SpawnInput): Promise<ResolvedSpawn> {
    return resolveSpawn(this.deps, { snapshots: this.snapshots, volumes: this.volumes }, input);
  }

  /** Spawns a sandbox: admission, provider, store, events. */
  async spawn(input: SpawnInput, signal?: AbortSignal): Promise<SandboxRecord> {
    const req = await this.resolveSpawn(input);
    const unhold = this.volumes.hold(req.volumes);
    try {
      const ticket = await this.deps.admission.admit({ owner_id: req.owner_id, ttl_ms: req.ttl_ms }, signal);
      try {
        const rec = await createSandbox(this.deps, req, signal, ticket);
        this.pauses.watch(rec);
        return rec;
      } finally {
        ticket.release();
      }
    } finally {
      unhold();
    }
  }

  /** A live sandbox visible to the caller, or `not_found`. */
  async get(id: string, caller: Caller): Promise<SandboxRecord> {
    return this.lookup.get(id, caller);
  }

  /**
   * `GET` of one sandbox (spec 4.11 rule 8): a remote sandbox's worker is asked for its runtime's
   * state, bounded at 2 s, and what changed is stored — a stopped runtime moves the sandbox to
   * `error` (`sandbox.error`), a vanished one to `destroyed` (reason `runtime_lost`, lease
   * released, so the answer is 404). A worker that does not answer leaves the cached record.
   */
  async refresh(id: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const { locator, store, bus, clock } = this.deps;
    if (rec.state !== 'running' || !rec.runtime_id || this.destroying(id)) return rec;
    // Null for this node's sandbox, a worker gone from the registry or one that does not answer.
    const status = await locator.remoteStatus(rec, REMOTE_STATUS_TIMEOUT_MS);
    if (status === null || status === 'running' || status === 'paused') return rec;
    const common = { sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
    const now = clock.now().toISOString();
    if (status === 'stopped') {
      const updated = await store.updateSandbox(rec.id, { state: 'error', updated_at: now });
      bus.publish({ type: 'sandbox.error', ...common, data: { provider: rec.provider, operation: 'status', reason: 'runtime stopped' } });
      return updated ?? rec;
    }
    await store.updateSandbox(rec.id, { state: 'destroyed', updated_at: now });
    await locator.leases.release(rec).catch(() => false);
    bus.publish({ type: 'sandbox.destroyed', ...common, data: { reason: 'runtime_lost' } });
    throw notFound(`sandbox ${id} not found`);
  }

  /** How many sandboxes a list shows on `provider` (every owner's): a count by index, never a listing (DESIGN.md §13). */
  async countOfProvider(provider: string): Promise<number> {
    return this.deps.store.countOfProvider(this.deps.clock.now().toISOString(), provider);
  }

  /**
   * Live sandboxes visible to the caller, oldest first (by created_at, then id). Visibility and the
   * TTL apply in the store query, so `limit` gives full pages; `id_prefix` keeps ids starting with it.
   */
  async list(caller: Caller, query: { id_prefix?: string; limit?: number } = {}): Promise<SandboxRecord[]> {
    return (await this.page(caller, query)).items;
  }

  /**
   * One page of `list` (DESIGN.md §13): keyset order (created_at, id) after `after`, visibility
   * and expiry in the query, so a page is full; `next` names the last row when more remain.
   */
  async page(
    caller: Caller,
    query: { id_prefix?: string; limit?: number; after?: ListPosition } = {},
  ): Promise<{ items: SandboxRecord[]; next: ListPosition | null }> {
    const filter: NonNullable<Parameters<SandboxStore['listSandboxes']>[0]> = {
      states: ['running', 'paused', 'unhealthy', 'error'],
      expires_after: this.deps.clock.now().toISOString(),
    };
    if (this.deps.settings.enforce_ownership && !caller.admin) filter.visible_to = { owner_id: caller.owner_id };
    if (query.id_prefix !== undefined && query.id_prefix !== '') filter.id_prefix = query.id_prefix;
    if (query.after !== undefined) filter.after = query.after;
    // One more than asked tells whether another page follows.
    if (query.limit !== undefined) filter.limit = query.limit + 1;
    const rows = (await this.deps.store.listSandboxes(filter)).filter((r) => this.visible(r, caller) && !this.pastTtl(r));
    if (query.limit === undefined || rows.length <= query.limit) return { items: rows, next: null };
    const items = rows.slice(0, query.limit);
    const last = items[items.length - 1]!;
    return { items, next: { created_at: last.created_at, id: last.id } };
  }

  async extend(id: string, ttl: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const ttlMs = parseDuration(ttl, 'ttl');
    if (ttlMs <= 0) throw badRequest('ttl must be positive');
    const limits = await this.deps.admission.limitsFor(rec.owner_id);
    if (limits.max_ttl_ms > 0 && ttlMs > limits.max_ttl_ms) {
      const data = { reason: 'max_ttl', operation: 'extend', requested: ttl, max: formatDuration(limits.max_ttl_ms) };
      this.deps.bus.publish({ type: 'resource.limit', sandbox_id: id, owner_id: rec.owner_id ?? undefined, data });
      throw new SbxError('resource_limit', `ttl exceeds the maximum of ${formatDuration(limits.max_ttl_ms)}`, { reason: 'max_ttl' });
    }
    // Racing a destroy: the sandbox is gone for the caller, never revived or answered as destroyed.
    if (this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    const now = this.deps.clock.now();
    const updated = await this.deps.store.updateSandbox(id, this.pauses.ttlPatch(rec, now, ttlMs));
    if (!updated || GONE.has(updated.state) || this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    // A remote sandbox's lease follows its expiry (TTL + 5 min), then the worker hears of it.
    await this.deps.locator.expiryMoved(updated);
    return updated;
  }

  /**
   * `PUT …/egress` (DESIGN.md §10): replaces both lists of a filtered sandbox (409 `conflict` for
   * any other network; a bad rule → 400 naming it, nothing changed). The gateway reads the store
   * per connection, so new connections see the lists at once; the provider closes the open ones
   * the new lists no longer allow.
   */
  async updateEgress(id: string, body: unknown, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const lists = parseEgress(body ?? {});
    if (rec.network !== 'filtered')
      throw conflict(
        `sandbox ${id} has network ${JSON.stringify(rec.network ?? 'default')}: egress rules apply only to network "filtered"`,
      );
    if (this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    const updated = await this.deps.store.updateSandbox(id, { egress: lists, updated_at: this.deps.clock.now().toISOString() });
    if (!updated || GONE.has(updated.state)) throw notFound(`sandbox ${id} not found`);
    // This node's provider closes what the lists no longer allow; a remote sandbox's worker gets them.
    await this.deps.locator.egressChanged(updated, lists);
    return updated;
  }

  /**
   * Idempotent: an already destroyed or expired sandbox answers success; unknown → not_found. A
   * live sandbox whose provider is not configured here answers `unavailable` and stays recorded:
   * its runtime may still run, and forgetting it would leak it.
   */
  async destroy(id: string, caller: Caller, reason = 'requested'): Promise<void> {
    const rec = await this.deps.store.getSandbox(id);
    if (!rec || !this.visible(rec, caller)) throw notFound(`sandbox ${id} not found`);
    if (this.stranded(rec)) throw providerNotConfigured(rec);
    await this.teardown(rec, reason);
  }

  /** Destroys every sandbox whose TTL passed; returns how many. Stranded sandboxes are left alone. */
  async prune(caller: Caller): Promise<number> {
    const now = this.deps.clock.now().getTime();
    let pruned = 0;
    // Past their TTL, by the expires_at index, page by page (DESIGN.md §13).
    for await (const rec of sandboxPages(this.deps.store, {
      states: ['running', 'paused', 'unhealthy', 'error', 'expired'],
      expires_by: new Date(now).toISOString(),
    })) {
      if (!this.visible(rec, caller)) continue;
      if (rec.state !== 'expired' && Date.parse(rec.expires_at) > now) continue;
      if (this.stranded(rec)) {
        this.lookup.warnStranded(rec);
        continue;
      }
      await this.teardown(rec, 'expired');
      pruned++;
    }
    return pruned;
  }

  /**
   * The reaper's pass over this worker's sandboxes: tears down every sandbox past its TTL, and
   * every sandbox whose runtime the provider reports stopped or missing (reason `runtime_lost`).
   * A `running` sandbox found so (killed from outside, no operation since) first moves to `error`
   * with `sandbox.error`, so the stream tells why. Running sandboxes are checked against one
   * runtime listing per provider, then each suspect is confirmed by its own status. A provider
   * that cannot answer destroys nothing; the next pass tries again. Returns how many were torn down.
   */
  reap(opts?: ReapOptions): Promise<number> {
    return this.reaper.reap(opts);
  }

  /** A live sandbox with a runtime on a provider this server does not run: nothing here can reach it. */
  stranded(rec: SandboxRecord): boolean {
    return this.lookup.stranded(rec);
  }

  /** Tears the runtime down (retried; see Teardowns), then marks the record destroyed and publishes. */
  teardown(rec: SandboxRecord, reason: string, retry = true): Promise<void> {
    return this.teardowns.run(rec, reason, { retry });
  }

  /**
   * A running sandbox with its provider, for exec/files/logs/processes. A paused one is resumed
   * first (DESIGN.md §16), unless `resume` is false (internal followers: then `unavailable`); the
   * call counts as activity for auto-pause.
   */
  async resolveRuntime(
    id: string,
    caller: Caller,
    opts: { resume?: boolean } = {},
  ): Promise<{ rec: SandboxRecord; provider: Provider; runtimeId: string }> {
    return this.runtimes.resolve(id, caller, opts);
  }

  /** Ownership (DESIGN.md §3 "Auth"): with enforcement on, an owned sandbox is private to its owner and admins. */
  visible(rec: SandboxRecord, caller: Caller): boolean {
    return this.lookup.visible(rec, caller);
  }

  pastTtl(rec: SandboxRecord): boolean {
    return this.lookup.pastTtl(rec);
  }
}
