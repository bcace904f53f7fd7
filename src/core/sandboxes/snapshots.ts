/**
 * Snapshots (DESIGN.md §10): a running sandbox's filesystem saved under a name by its provider
 * (docker commits an image, proot and mock copy the root tree), listed, deleted, and used as the
 * starting point of spawns and templates. A record is stored only after the provider succeeded,
 * and the provider's copy is removed again when the record cannot be stored: never a record
 * without a snapshot, never a snapshot nobody knows about. Kept until deleted.
 */
import { badRequest, conflict, notFound, SbxError, unavailable } from '../errors.js';
import type { Provider, SnapshotRecord, SnapshotStore } from '../ports/index.js';
import type { Caller, OwnerRule } from './caller.js';
import type { SandboxDeps } from './deps.js';
import type { ResolveRuntime } from './runtimes.js';

/** Names of snapshots and volumes: they become image and directory names, so a narrow alphabet. */
const CATALOG_NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

/** Validates a snapshot or volume name (400 naming the rule). */
export function checkCatalogName(kind: 'snapshot' | 'volume', name: unknown): string {
  if (typeof name !== 'string' || !CATALOG_NAME.test(name)) {
    throw badRequest(
      `${kind} name must match [a-z0-9][a-z0-9_.-]{0,63} (lower-case letters, digits, ".", "_", "-"; at most ` +
        `64), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** The 501 of a provider that lacks an operation. */
export function cannot(provider: string, what: string, why = ''): SbxError {
  return new SbxError('not_implemented', `provider ${provider} cannot ${what}${why ? `: ${why}` : ''}`);
}

/** Names being created by this process: a second create of one name waits for no provider work. */
class Reservations {
  private readonly held = new Set<string>();

  take(name: string, taken: () => SbxError): () => void {
    if (this.held.has(name)) throw taken();
    this.held.add(name);
    return () => this.held.delete(name);
  }
}

/** What snapshots read and write: their records, the providers that hold them (here or a worker's), events, the clock. */
export type SnapshotDeps = { store: SnapshotStore } & Pick<SandboxDeps, 'bus' | 'clock' | 'settings' | 'providers' | 'locator'>;

export class SnapshotService {
  private readonly creating = new Reservations();
  private readonly store: SnapshotStore;

  constructor(
    private readonly deps: SnapshotDeps,
    /** The running sandbox a snapshot is taken of, with its provider. */
    private readonly resolveRuntime: ResolveRuntime,
    private readonly ownerRule: OwnerRule,
  ) {
    this.store = deps.store;
  }

  /** Saves the sandbox's filesystem as `name`; ownership and liveness as for every sandbox operation. */
  async create(sandboxId: string, rawName: unknown, caller: Caller, signal?: AbortSignal): Promise<SnapshotRecord> {
    const name = checkCatalogName('snapshot', rawName);
    const taken = () => conflict(`snapshot "${name}" already exists`);
    const { rec, provider, runtimeId } = await this.resolveRuntime(sandboxId, caller);
    if (this.deps.settings.pool.enabled)
      throw cannot(rec.provider, 'take snapshots of pool sandboxes', 'they share one runtime with other users');
    if (!provider.snapshot) throw cannot(rec.provider, 'take snapshots');
    if (await this.store.getSnapshot(name)) throw taken();
    const release = this.creating.take(name, taken);
    try {
      const made = await provider.snapshot(runtimeId, name, signal);
      const snap: SnapshotRecord = {
        name,
        provider: rec.provider,
        image: made.image,
        kernel: made.kernel ?? null,
        size_bytes: made.size_bytes,
        created_at: this.deps.clock.now().toISOString(),
        owner_id: rec.owner_id,
        sandbox_id: rec.id,
        worker_id: rec.worker_id,
      };
      try {
        await this.store.insertSnapshot(snap);
      } catch (err) {
        // Another replica stored the name meanwhile, or the store failed: the copy goes again.
        await provider.deleteSnapshot?.(name, made.image, AbortSignal.timeout(60_000)).catch(() => undefined);
        throw err;
      }
      const data = { name, provider: snap.provider, image: snap.image, size_bytes: snap.size_bytes };
      this.deps.bus.publish({
        type: 'snapshot.created',
        sandbox_id: rec.id,
        owner_id: rec.owner_id ?? undefined,
        worker_id: rec.worker_id,
        data,
      });
      return snap;
    } finally {
      release();
    }
  }

  /** Visible snapshots sorted by name. */
  async list(caller: Caller): Promise<SnapshotRecord[]> {
    return (await this.store.listSnapshots()).filter((s) => this.visible(s, caller));
  }

  async get(name: string, caller: Caller): Promise<SnapshotRecord> {
    const rec = await this.store.getSnapshot(name);
    if (!rec || !this.visible(rec, caller)) throw notFound(`snapshot ${name} not found`);
    return rec;
  }

  /** Removes the provider's copy, then the record (sandboxes already started from it keep running). */
  async remove(name: string, caller: Caller, signal?: AbortSignal): Promise<void> {
    const rec = await this.get(name, caller);
    await (await this.providerOf(rec)).deleteSnapshot?.(rec.name, rec.image, signal);
    if (await this.store.deleteSnapshot(rec.name)) {
      this.deps.bus.publish({
        type: 'snapshot.deleted',
        owner_id: rec.owner_id ?? undefined,
        data: { name: rec.name, provider: rec.provider },
      });
    }
  }

  /**
   * The snapshot a spawn starts from (404 before anything is created): it fixes the provider and
   * the image; an explicitly different provider is a 400.
   */
  async forSpawn(name: string, provider: string | undefined, owner: string | null): Promise<SnapshotRecord> {
    const rec = await this.store.getSnapshot(checkCatalogName('snapshot', name));
    if (!rec || !this.visible(rec, { owner_id: owner, admin: false })) throw notFound(`snapshot ${name} not found`);
    if (provider !== undefined && provider !== rec.provider) {
      throw badRequest(`snapshot ${name} was taken on provider ${rec.provider}; a spawn from it cannot ask for provider ${provider}`);
    }
    // Spawns from it run where it is kept (placement pins them there).
    if (this.deps.locator.providerMissing(rec)) {
      throw unavailable(`provider "${rec.provider}" that holds snapshot ${name} is not configured on this server`);
    }
    return rec;
  }

  /** The provider holding a snapshot: this node's, or its worker's over the RPC. */
  private async providerOf(rec: SnapshotRecord): Promise<Provider> {
    const item = { worker_id: rec.worker_id, provider: rec.provider, id: rec.sandbox_id };
    const holder = await this.deps.locator.holder(item, `snapshot ${rec.name}`);
    if (!holder) throw unavailable(`worker ${rec.worker_id} that holds snapshot ${rec.name} is not registered`);
    return holder;
  }

  private visible(rec: SnapshotRecord, caller: Caller): boolean {
    return this.ownerRule(rec.owner_id, caller);
  }
}
