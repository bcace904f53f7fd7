/**
 * Snapshots on disk: `<dataDir>/.snapshots/<name>/` holds Firecracker's `vmstate` and `memory`
 * (PUT /snapshot/create, a Full snapshot taken while Paused), a copy of the guest's root drive
 * (Firecracker's snapshot does not hold disk contents) and `meta.json`. A spawn whose image is
 * `firecracker-snapshot/<name>` restores from it (PUT /snapshot/load).
 */
import { constants } from 'node:fs';
import { cp, lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SbxError } from '../../../core/errors.js';

export const SNAPSHOT_IMAGE_PREFIX = 'firecracker-snapshot/';
const NAME_RE = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

export interface SnapshotFiles {
  dir: string;
  vmstate: string;
  memory: string;
  rootfs: string;
  meta: string;
}

export interface SnapshotMeta {
  name: string;
  kernel: string;
  created_at: string;
  vcpus: number;
  memory_mib: number;
}

export function snapshotRoot(dataDir: string): string {
  return join(dataDir, '.snapshots');
}

export function snapshotFiles(dataDir: string, name: string): SnapshotFiles {
  if (!NAME_RE.test(name) || name.includes('..'))
    throw new SbxError('bad_request', `snapshot name ${JSON.stringify(name)} must match [a-z0-9][a-z0-9_.-]{0,63}`);
  const dir = join(snapshotRoot(dataDir), name);
  return {
    dir,
    vmstate: join(dir, 'vmstate'),
    memory: join(dir, 'memory'),
    rootfs: join(dir, 'rootfs.ext4'),
    meta: join(dir, 'meta.json'),
  };
}

/** The snapshot name an image names, or null when it is not a snapshot image. */
export function snapshotNameOf(image: string): string | null {
  return image.startsWith(SNAPSHOT_IMAGE_PREFIX) ? image.slice(SNAPSHOT_IMAGE_PREFIX.length) : null;
}

/**
 * Copy-on-write where the filesystem can (reflink), a plain copy where it cannot. A drive that is a
 * directory (the test launchers' stand-in) keeps its symlinks as they are: a guest resolves them.
 */
export async function copyDisk(from: string, to: string): Promise<void> {
  await cp(from, to, { recursive: true, mode: constants.COPYFILE_FICLONE, errorOnExist: true, force: false, verbatimSymlinks: true });
}

/** Bytes under `path` (a file, or a directory tree), not following links. */
export async function sizeOf(path: string): Promise<number> {
  const st = await lstat(path);
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const e of await readdir(path)) total += await sizeOf(join(path, e));
  return total;
}

export async function readSnapshotMeta(files: SnapshotFiles): Promise<SnapshotMeta | null> {
  try {
    return JSON.parse(await readFile(files.meta, 'utf8')) as SnapshotMeta;
  } catch {
    return null;
  }
}

/**
 * Builds a snapshot in a scratch directory and moves it into place only once complete, so a
 * failure leaves nothing half-made under the name. `fill` writes vmstate, memory and rootfs.
 */
export async function buildSnapshot(
  dataDir: string,
  name: string,
  meta: Omit<SnapshotMeta, 'name' | 'created_at'>,
  fill: (scratch: SnapshotFiles) => Promise<void>,
): Promise<number> {
  const final = snapshotFiles(dataDir, name);
  await mkdir(snapshotRoot(dataDir), { recursive: true });
  if (await readSnapshotMeta(final)) throw new SbxError('conflict', `snapshot ${name} already exists`);
  const scratchDir = join(snapshotRoot(dataDir), `.partial-${name}-${process.pid}-${Date.now()}`);
  const scratch: SnapshotFiles = {
    dir: scratchDir,
    vmstate: join(scratchDir, 'vmstate'),
    memory: join(scratchDir, 'memory'),
    rootfs: join(scratchDir, 'rootfs.ext4'),
    meta: join(scratchDir, 'meta.json'),
  };
  await mkdir(scratchDir);
  try {
    await fill(scratch);
    await writeFile(scratch.meta, JSON.stringify({ ...meta, name, created_at: new Date().toISOString() } satisfies SnapshotMeta));
    const size = await sizeOf(scratchDir);
    try {
      await rename(scratchDir, final.dir);
    } catch {
      throw new SbxError('conflict', `snapshot ${name} already exists`);
    }
    return size;
  } finally {
    await rm(scratchDir, { recursive: true, force: true });
  }
}

export async function deleteSnapshotFiles(dataDir: string, image: string): Promise<void> {
  const name = snapshotNameOf(image);
  if (name === null) throw new SbxError('bad_request', `${JSON.stringify(image)} is not a firecracker snapshot image`);
  await rm(snapshotFiles(dataDir, name).dir, { recursive: true, force: true });
}
