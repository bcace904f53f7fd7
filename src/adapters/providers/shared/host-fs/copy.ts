import { constants } from 'node:fs';
import { chmod, lutimes, mkdir, open, readdir, readlink, symlink, utimes, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { SbxError } from '../../../../core/errors.js';
import { errnoOf } from './errors.js';
import { MAX_TREE_DEPTH } from './tree.js';
import { at, closeQuietly, lstatAt, O_PATH, openDirAt } from './walk.js';

/** How much one copy may take: a sandbox cannot make a fork fill the host's disk or run for ever. */
export interface CopyLimits {
  maxBytes: number;
  maxEntries: number;
}

export interface CopyResult {
  bytes: number;
  entries: number;
  /** Special files (devices, FIFOs, sockets) and entries that vanished or changed kind under the copy. */
  skipped: number;
}

const CHUNK = 1024 * 1024;
const ROOT_HANDLE = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** A file is opened for reading without following a link and without blocking on a FIFO swapped in. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Copies the tree of the host directory `src` (a sandbox's root, whose contents a process inside
 * may change while this runs) to the new directory `dest`, by handle (walk.ts): every directory
 * is opened from its parent without following links, every file opened with O_NOFOLLOW, so a
 * swapped-in link never leads the copy outside `src`. Links are copied as links (their target
 * text, never followed); regular files copy the bytes they had when opened (at most their size
 * then, so a file that keeps growing cannot keep the copy going); devices, FIFOs and sockets are
 * skipped; modes and times are kept, owners are this process's. Over `limits` → 413
 * `payload_too_large` (the caller removes `dest`). Hard links become separate files.
 */
export async function copyTreeByHandle(src: string, dest: string, limits: CopyLimits, signal?: AbortSignal): Promise<CopyResult> {
  const result: CopyResult = { bytes: 0, entries: 0, skipped: 0 };
  const root = await open(src, ROOT_HANDLE);
  try {
    await mkdir(dest, { recursive: true, mode: 0o700 });
    await copyDir(root, dest, 0, limits, result, signal);
  } finally {
    await closeQuietly(root);
  }
  return result;
}

function tooLarge(limits: CopyLimits, what: 'bytes' | 'entries'): SbxError {
  return new SbxError(
    'payload_too_large',
    what === 'bytes'
      ? `the sandbox's files exceed the ${Math.round(limits.maxBytes / 1024 / 1024)} MiB a copy may take`
      : `the sandbox has more than ${limits.maxEntries} files, more than a copy may take`,
  );
}

async function copyDir(dir: FileHandle, to: string, depth: number, limits: CopyLimits, r: CopyResult, signal?: AbortSignal): Promise<void> {
  if (depth >= MAX_TREE_DEPTH) throw new SbxError('payload_too_large', `the sandbox's tree is deeper than ${MAX_TREE_DEPTH} levels`);
  for (const name of await readdir(at(dir))) {
    signal?.throwIfAborted();
    if (++r.entries > limits.maxEntries) throw tooLarge(limits, 'entries');
    const st = await lstatAt(dir, name);
    const target = join(to, name);
    if (st === null) {
      r.skipped++;
    } else if (st.isDirectory()) {
      let sub: FileHandle;
      try {
        sub = await openDirAt(dir, name);
      } catch (err) {
        if (!gone(err)) throw err;
        r.skipped++;
        continue;
      }
      try {
        await mkdir(target, { mode: 0o700 });
        await copyDir(sub, target, depth + 1, limits, r, signal);
      } finally {
        await closeQuietly(sub);
      }
      await chmod(target, st.mode & 0o7777);
      await utimes(target, st.atime, st.mtime);
    } else if (st.isSymbolicLink()) {
      const link = await readlink(at(dir, name)).catch((err: unknown) => (gone(err) ? null : Promise.reject(err)));
      if (link === null) {
        r.skipped++;
        continue;
      }
      await symlink(link, target);
      await lutimes(target, st.atime, st.mtime).catch(() => undefined);
    } else if (st.isFile()) {
      if (!(await copyFile(dir, name, target, limits, r, signal))) r.skipped++;
    } else {
      r.skipped++;
    }
  }
}

/** One regular file's bytes, up to its size when opened; false when it is no regular file any more. */
async function copyFile(
  dir: FileHandle,
  name: string,
  target: string,
  limits: CopyLimits,
  r: CopyResult,
  signal?: AbortSignal,
): Promise<boolean> {
  let from: FileHandle;
  try {
    from = await open(at(dir, name), READ_FLAGS);
  } catch (err) {
    if (gone(err)) return false;
    throw err;
  }
  try {
    const st = await from.stat();
    if (!st.isFile()) return false;
    r.bytes += st.size;
    if (r.bytes > limits.maxBytes) throw tooLarge(limits, 'bytes');
    const to = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(1, st.size)));
      for (let left = st.size, pos = 0; left > 0; ) {
        signal?.throwIfAborted();
        const { bytesRead } = await from.read(buf, 0, Math.min(buf.length, left), pos);
        if (bytesRead === 0) break; // shrunk meanwhile: what is there is the copy
        await to.write(buf, 0, bytesRead);
        left -= bytesRead;
        pos += bytesRead;
      }
    } finally {
      await to.close();
    }
    await chmod(target, st.mode & 0o7777);
    await utimes(target, st.atime, st.mtime);
    return true;
  } finally {
    await closeQuietly(from);
  }
}

/** The entry vanished or changed kind between the listing and its open (a process inside at work). */
function gone(err: unknown): boolean {
  const code = errnoOf(err);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'ENXIO';
}
