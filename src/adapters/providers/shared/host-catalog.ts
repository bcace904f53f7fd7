import { execFile } from 'node:child_process';
import { lstat, mkdir, readdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { conflict, providerError, SbxError } from '../../../core/errors.js';
import type { CatalogItem, Provider, SnapshotResult } from '../../../core/ports/index.js';
import { HostFs } from './host-fs.js';
import { copyTreeByHandle, type CopyLimits } from './host-fs/copy.js';

const run = promisify(execFile);
const NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
/** A fork's copy of a sandbox (DESIGN.md §16): at most 8 GiB and a million entries. */
const FORK_LIMITS: CopyLimits = { maxBytes: 8 * 1024 ** 3, maxEntries: 1_000_000 };

/**
 * Snapshots and volumes of host-directory providers (proot, mock; DESIGN.md §10), under the
 * provider's data dir: `snapshots/<name>` is a copy of a sandbox's root tree, `volumes/<name>` a
 * directory bound into the sandboxes that mount it. Copies keep symbolic links as links (`cp -a`
 * never dereferences), removals go by directory handle (HostFs.removeRoot), so a link planted in
 * a sandbox never steers either outside the tree. Nothing here is shown to callers as a host path.
 */
export class HostCatalog {
  /**
   * `installationId`: fork images (DESIGN.md §16) live under `forks/<installation>/`, so a data dir
   * two installations share never has one remove the other's; without one they are listed as none.
   */
  constructor(
    readonly dataDir: string,
    private readonly installationId: string | null = null,
    private readonly forkLimits: CopyLimits = FORK_LIMITS,
  ) {}

  /** The Provider methods of a host-directory provider that this catalogue serves, over its runtimes. */
  providerMethods(runtimes: {
    requireRunning(runtimeId: string): Promise<string>;
  }): Pick<
    Provider,
    'snapshot' | 'deleteSnapshot' | 'createVolume' | 'deleteVolume' | 'volumeSizes' | 'forkImage' | 'deleteForkImage' | 'listForkImages'
  > {
    return {
      snapshot: async (runtimeId, name, signal) => this.snapshot(await runtimes.requireRunning(runtimeId), name, signal),
      deleteSnapshot: (name) => this.deleteSnapshot(name),
      createVolume: (name) => this.createVolume(name),
      deleteVolume: (name) => this.deleteVolume(name),
      volumeSizes: (names) => this.volumeSizes(names),
      forkImage: async (runtimeId, name, signal) => this.forkImage(await runtimes.requireRunning(runtimeId), name, signal),
      deleteForkImage: (name) => new HostFs(this.forkDir(name)).removeRoot(),
      listForkImages: () => this.listForkImages(),
    };
  }

  /** Where this installation's fork images are kept. */
  private forksDir(): string {
    return join(this.dataDir, 'forks', this.installationId ?? '_');
  }

  forkDir(name: string): string {
    return join(this.forksDir(), checked(name));
  }

  /**
   * A fork's copy of the runtime's root tree (DESIGN.md §16): by handle, links kept as links,
   * special files skipped, bounded (copy.ts); via a temporary name, so a failed copy leaves nothing.
   */
  async forkImage(runtimeDir: string, name: string, signal?: AbortSignal): Promise<{ image: string }> {
    const dest = this.forkDir(name);
    if (await exists(dest)) throw conflict(`fork image ${name} already exists on this provider`);
    const tmp = join(this.forksDir(), `.partial-${name}-${process.pid}-${Date.now()}`);
    try {
      await mkdir(this.forksDir(), { recursive: true, mode: 0o700 });
      await copyTreeByHandle(runtimeDir, tmp, this.forkLimits, signal);
      await rename(tmp, dest);
    } catch (err) {
      await new HostFs(tmp).removeRoot().catch(() => undefined);
      if (signal?.aborted) throw signal.reason;
      if (err instanceof SbxError) throw err;
      throw providerError(`fork: could not copy the sandbox's files`);
    }
    return { image: `sbx-fork/${name}` };
  }

  /** The tree a spawn from fork image `name` copies; provider_error when it is gone. */
  async forkSource(name: string): Promise<string> {
    const dir = this.forkDir(name);
    if (!(await exists(dir))) throw providerError(`fork image ${name} is missing from the provider's data directory`);
    return dir;
  }

  /** This installation's fork images, with when each was made (none without an installation id). */
  async listForkImages(): Promise<CatalogItem[]> {
    if (this.installationId === null) return [];
    const entries = await readdir(this.forksDir(), { withFileTypes: true }).catch(() => []);
    const out: CatalogItem[] = [];
    for (const e of entries) {
      if (!e.isDirectory() || !NAME.test(e.name)) continue;
      const st = await lstat(join(this.forksDir(), e.name)).catch(() => null);
      if (st) out.push({ name: e.name, image: `sbx-fork/${e.name}`, created_at: st.mtime.toISOString() });
    }
    return out;
  }

  snapshotDir(name: string): string {
    return join(this.dataDir, 'snapshots', checked(name));
  }

  volumeDir(name: string): string {
    return join(this.dataDir, 'volumes', checked(name));
  }

  /** Copies the runtime's root tree to `snapshots/<name>` (via a temporary name, so a failed copy leaves nothing). */
  async snapshot(runtimeDir: string, name: string, signal?: AbortSignal): Promise<SnapshotResult> {
    const dest = this.snapshotDir(name);
    if (await exists(dest)) throw conflict(`snapshot "${name}" already exists on this provider`);
    const tmp = join(this.dataDir, 'snapshots', `.partial-${name}-${process.pid}-${Date.now()}`);
    const failed = async (err: unknown) => {
      await new HostFs(tmp).removeRoot().catch(() => undefined);
      if (signal?.aborted) return signal.reason as unknown;
      return err;
    };
    try {
      await mkdir(join(this.dataDir, 'snapshots'), { recursive: true, mode: 0o700 });
      await copyTree(runtimeDir, tmp, signal);
    } catch (err) {
      const e = await failed(err);
      throw e === err ? providerError(`snapshot ${name}: could not copy the sandbox's files`) : e;
    }
    try {
      await rename(tmp, dest);
    } catch (err) {
      const e = await failed(err);
      // Another copy of the name landed meanwhile.
      const code = (err as NodeJS.ErrnoException).code;
      if (e === err && (code === 'ENOTEMPTY' || code === 'EEXIST')) throw conflict(`snapshot "${name}" already exists on this provider`);
      throw e === err ? providerError(`snapshot ${name}: could not store the copy`) : e;
    }
    return { image: `sbx-snapshot/${name}`, size_bytes: await treeSize(dest), kernel: null };
  }

  /** The tree a spawn from snapshot `name` copies; provider_error when it is gone from the data dir. */
  async snapshotSource(name: string): Promise<string> {
    const dir = this.snapshotDir(name);
    if (!(await exists(dir))) throw providerError(`snapshot ${name} is missing from the provider's data directory`);
    return dir;
  }

  deleteSnapshot(name: string): Promise<void> {
    return new HostFs(this.snapshotDir(name)).removeRoot();
  }

  /** Makes `volumes/<name>` (an existing one, left by an earlier install of the name, is kept). */
  async createVolume(name: string): Promise<void> {
    await mkdir(this.volumeDir(name), { recursive: true, mode: 0o755 });
  }

  deleteVolume(name: string): Promise<void> {
    return new HostFs(this.volumeDir(name)).removeRoot();
  }

  /** Host directory of a volume to mount; provider_error when it is gone. */
  async volumeSource(name: string): Promise<string> {
    const dir = this.volumeDir(name);
    if (!(await exists(dir))) throw providerError(`volume ${name} is missing from the provider's data directory`);
    return dir;
  }

  /** Bytes stored in each volume (sum of the sizes of its entries, links not followed); null when it is gone. */
  async volumeSizes(names: readonly string[]): Promise<Record<string, number | null>> {
    const out: Record<string, number | null> = {};
    for (const n of names) out[n] = (await exists(this.volumeDir(n))) ? await treeSize(this.volumeDir(n)) : null;
    return out;
  }
}

function checked(name: string): string {
  if (!NAME.test(name)) throw providerError(`invalid snapshot or volume name ${JSON.stringify(name)}`);
  return name;
}

async function exists(p: string): Promise<boolean> {
  return (await stat(p).catch(() => null)) !== null;
}

/**
 * `cp -a src/. dest`: links copied as links, modes, owners (where allowed) and times kept. The
 * server's own environment (secrets) never reaches the child.
 */
export async function copyTree(src: string, dest: string, signal?: AbortSignal): Promise<void> {
  await mkdir(dest, { recursive: true });
  await run('cp', ['-a', '--no-dereference', `${src}/.`, dest], { signal, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
}

/** Sum of the sizes of every entry under `dir` (lstat: a link counts as itself, never followed). */
export async function treeSize(dir: string): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length > 0) {
    const d = stack.pop()!;
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const p = join(d, e.name);
      const st = await lstat(p).catch(() => null);
      if (!st) continue;
      if (st.isDirectory()) stack.push(p);
      else total += st.size;
    }
  }
  return total;
}
