/**
 * Volumes (DESIGN.md §10): named storage made by a provider (docker named volumes, proot and mock
 * directories under their data dir) that sandboxes mount read-write at spawn; the data outlives
 * every sandbox and goes only with the volume's delete, which waits until no live sandbox mounts it.
 */
import { badRequest, conflict, isSbxError, notFound, unavailable } from '../errors.js';
import { canonicalProviderName } from '../providers/registry.js';
import type { Provider, VolumeMount, VolumeRecord, VolumeStore } from '../ports/index.js';
import type { Caller, OwnerRule } from './caller.js';
import type { SandboxDeps } from './deps.js';
import { sandboxPath } from './paths.js';
import { cannot, checkCatalogName } from './snapshots.js';

/** Most volumes one sandbox mounts. */
export const MAX_MOUNTS = 16;
/** Paths a volume may not cover: the runtime's own kernel interfaces. */
const RESERVED = ['/proc', '/sys', '/dev'];

/** A volume with its size (null: the provider cannot tell). */
export type VolumeView = VolumeRecord & { size_bytes: number | null };

/** What volumes read and write: their records, the providers that hold them (here or a worker's), events, the clock. */
export type VolumeDeps = { store: VolumeStore } & Pick<SandboxDeps, 'bus' | 'clock' | 'settings' | 'providers' | 'locator'>;

export class VolumeService {
  /** Names being created by this process. */
  private readonly creating = new Set<string>();
  /** Volumes of spawns under way here (not yet stored, so the store cannot tell they are mounted). */
  private readonly spawning = new Map<string, number>();

  private readonly store: VolumeStore;

  constructor(
    private readonly deps: VolumeDeps,
    private readonly ownerRule: OwnerRule,
  ) {
    this.store = deps.store;
  }

  /**
   * Makes the volume on `providerName` (default: the default provider): on this node when it runs
   * that provider, else on a worker that does (placement picks it; its sandboxes then go there).
   * 409 when the name is taken.
   */
  async create(rawName: unknown, providerName: string | undefined, caller: Caller, signal?: AbortSignal): Promise<VolumeView> {
    const name = checkCatalogName('volume', rawName);
    const { providers, settings, clock, locator } = this.deps;
    const chosen = providerName !== undefined ? canonicalProviderName(providerName) : await locator.spawnProvider(undefined);
    if (!providers.has(chosen) && !(await locator.knownProvider(chosen)))
      throw badRequest(`unknown provider "${chosen}" (available here: ${providers.names().join(', ') || 'none'})`);
    if (settings.pool.enabled) throw cannot(chosen, 'mount volumes into pool sandboxes', 'they share one runtime with other users');
    // Here when this node runs the provider, else a worker placement picks (no sandbox slot taken there).
    const { provider, worker_id: workerId } = await locator.volumeHome(chosen, caller.owner_id, name);
    if (!provider.createVolume) throw cannot(chosen, 'make volumes');
    const taken = () => conflict(`volume "${name}" already exists`);
    if ((await this.store.getVolume(name)) || this.creating.has(name)) throw taken();
    this.creating.add(name);
    try {
      await provider.createVolume(name, signal);
      const rec: VolumeRecord = {
        name,
        provider: chosen,
        created_at: clock.now().toISOString(),
        owner_id: caller.owner_id,
        worker_id: workerId,
      };
      try {
        await this.store.insertVolume(rec);
      } catch (err) {
        // Stored by another replica meanwhile (its volume is the same named one: leave it), or the store failed.
        if (!(isSbxError(err) && err.code === 'conflict')) await provider.deleteVolume?.(name).catch(() => undefined);
        throw err;
      }
      this.deps.bus.publish({ type: 'volume.created', owner_id: rec.owner_id ?? undefined, data: { name, provider: chosen } });
      return { ...rec, size_bytes: (await this.sizes(provider, [name]))[name] ?? null };
    } finally {
      this.creating.delete(name);
    }
  }

  /** Visible volumes sorted by name, each with its size. */
  async list(caller: Caller, signal?: AbortSignal): Promise<VolumeView[]> {
    const recs = (await this.store.listVolumes()).filter((v) => this.visible(v, caller));
    const sizes: Record<string, number | null> = {};
    const groups = new Map<string, VolumeRecord[]>();
    for (const r of recs) {
      const key = `${this.workerOf(r)}\0${r.provider}`;
      groups.set(key, [...(groups.get(key) ?? []), r]);
    }
    for (const group of groups.values()) {
      const p = await this.providerOf(group[0]!).catch(() => undefined);
      if (p)
        Object.assign(
          sizes,
          await this.sizes(
            p,
            group.map((r) => r.name),
            signal,
          ),
        );
    }
    return recs.map((r) => ({ ...r, size_bytes: sizes[r.name] ?? null }));
  }

  async get(name: string, caller: Caller): Promise<VolumeRecord> {
    const rec = await this.store.getVolume(name);
    if (!rec || !this.visible(rec, caller)) throw notFound(`volume ${name} not found`);
    return rec;
  }

  /** 409 while a sandbox that is not destroyed mounts it; then the provider's volume and the record go. */
  async remove(name: string, caller: Caller, signal?: AbortSignal): Promise<void> {
    const rec = await this.get(name, caller);
    if (this.spawning.has(rec.name)) throw conflict(`volume ${name} is being mounted by a sandbox that is starting`);
    const users = await this.store.sandboxesMounting(rec.name);
    if (users.length > 0)
      throw conflict(`volume ${name} is mounted by sandbox ${users.join(', ')}: destroy ${users.length > 1 ? 'them' : 'it'} first`);
    await (await this.providerOf(rec)).deleteVolume?.(rec.name, signal);
    if (await this.store.deleteVolume(rec.name)) {
      this.deps.bus.publish({
        type: 'volume.deleted',
        owner_id: rec.owner_id ?? undefined,
        data: { name: rec.name, provider: rec.provider },
      });
    }
  }

  /**
   * A spawn's `volumes`, checked before anything is created: at most 16, names known (404) and on
   * the spawn's provider, mount paths absolute, normalized, not `/` nor under /proc, /sys, /dev,
   * each name and path once.
   */
  async forSpawn(
    mounts: readonly { name?: unknown; mount_path?: unknown }[],
    provider: string,
    owner: string | null,
  ): Promise<VolumeMount[]> {
    if (!Array.isArray(mounts)) throw badRequest('volumes must be an array of {name, mount_path}');
    if (mounts.length > MAX_MOUNTS) throw badRequest(`at most ${MAX_MOUNTS} volumes per sandbox`);
    const out: VolumeMount[] = [];
    for (const [i, m] of mounts.entries()) {
      const name = checkCatalogName('volume', m?.name);
      const raw = m?.mount_path;
      const path = sandboxPath(raw, `volumes[${i}].mount_path`);
      if (path !== raw) throw badRequest(`volumes[${i}].mount_path must be normalized: ${JSON.stringify(raw)} (did you mean ${path}?)`);
      if (path === '/') throw badRequest(`volumes[${i}].mount_path cannot be /`);
      if (RESERVED.some((r) => path === r || path.startsWith(`${r}/`)))
        throw badRequest(`volumes[${i}].mount_path cannot be under ${RESERVED.join(', ')}`);
      if (out.some((o) => o.name === name)) throw badRequest(`volume ${name} is mounted twice`);
      if (out.some((o) => o.mount_path === path)) throw badRequest(`two volumes are mounted at ${path}`);
      out.push({ name, mount_path: path });
    }
    for (const m of out) {
      const rec = await this.store.getVolume(m.name);
      if (!rec || !this.visible(rec, { owner_id: owner, admin: false })) throw notFound(`volume ${m.name} not found`);
      if (rec.provider !== provider)
        throw badRequest(`volume ${m.name} lives on provider ${rec.provider}; this sandbox runs on ${provider}`);
    }
    return out;
  }

  /** The worker that must run a sandbox mounting these (null for none); they must all be on one. */
  async placementOf(mounts: readonly VolumeMount[]): Promise<string | null> {
    let worker: string | null = null;
    for (const m of mounts) {
      const rec = await this.store.getVolume(m.name);
      if (!rec) throw notFound(`volume ${m.name} not found`);
      const w = this.workerOf(rec);
      if (worker !== null && w !== worker)
        throw badRequest(
          `volumes ${mounts.map((x) => x.name).join(', ')} are held by different workers (${worker}, ${w}): ` +
            `one sandbox cannot mount them all`,
        );
      worker = w;
    }
    return worker;
  }

  private workerOf(rec: VolumeRecord): string {
    return rec.worker_id ?? this.deps.settings.worker_id;
  }

  /** The provider holding a volume: this node's, or its worker's over the RPC. */
  private async providerOf(rec: VolumeRecord): Promise<Provider> {
    const worker = this.workerOf(rec);
    const item = { worker_id: worker, provider: rec.provider, id: `volume-${rec.name}` };
    const holder = await this.deps.locator.holder(item, `volume ${rec.name}`);
    if (!holder) throw unavailable(`worker ${worker} that holds volume ${rec.name} is not registered`);
    return holder;
  }

  /** Marks the volumes of a spawn under way until `release` (a delete meanwhile is a conflict). */
  hold(mounts: readonly VolumeMount[]): () => void {
    for (const m of mounts) this.spawning.set(m.name, (this.spawning.get(m.name) ?? 0) + 1);
    return () => {
      for (const m of mounts) {
        const n = (this.spawning.get(m.name) ?? 1) - 1;
        if (n > 0) this.spawning.set(m.name, n);
        else this.spawning.delete(m.name);
      }
    };
  }

  private async sizes(p: Provider, names: string[], signal?: AbortSignal): Promise<Record<string, number | null>> {
    if (!p.volumeSizes || names.length === 0) return {};
    // A size is a courtesy: a provider that cannot answer now leaves it null, never fails the list.
    return p.volumeSizes(names, signal).catch(() => ({}));
  }

  private visible(rec: VolumeRecord, caller: Caller): boolean {
    return this.ownerRule(rec.owner_id, caller);
  }
}
