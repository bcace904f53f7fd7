import { constants, type Stats } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { posix } from 'node:path';
import { badRequest, notFound, providerError } from '../../../../core/errors.js';
import { errnoOf, fsError } from './errors.js';

/*
 * Race-free resolution of sandbox paths under a host directory. Node has no openat(2), so a
 * directory is held open and its children are addressed as `/proc/self/fd/<fd>/<name>`: the kernel
 * resolves the fd to the directory it was opened on (whatever has been renamed or swapped since)
 * and looks up one name in it. Every directory on the way is opened with O_NOFOLLOW, so a
 * directory that a process inside the sandbox swaps for a symbolic link makes the open fail
 * instead of leading out of the root. Symbolic links are resolved here, one hop at a time,
 * against the sandbox root, so those that stay inside keep working.
 */

/** O_PATH (Linux): a handle that names a directory without opening it for reading. */
export const O_PATH: number = (constants as Record<string, number | undefined>).O_PATH ?? 0o10000000;
const DIR_HANDLE = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** As many links as the kernel follows in one path lookup. */
const MAX_LINK_HOPS = 40;
/** Looks at one component that keeps changing under a walk before it gives up. */
const MAX_RETRIES = 40;

/** The path of `name` in the directory `dir` is open on: looked up from the handle, never by name. */
export function at(dir: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${dir.fd}` : `/proc/self/fd/${dir.fd}/${name}`;
}

/** Opens the directory `name` in `dir` without following a symbolic link (ENOTDIR if it is one). */
export function openDirAt(dir: FileHandle, name: string): Promise<FileHandle> {
  return open(at(dir, name), DIR_HANDLE);
}

/** lstat of `name` in `dir`; null when there is no such entry. */
export async function lstatAt(dir: FileHandle, name: string): Promise<Stats | null> {
  try {
    return await lstat(at(dir, name));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/** Closes a handle, ignoring errors: for cleanup paths that already have an error to report. */
export async function closeQuietly(fh: FileHandle | undefined): Promise<void> {
  await fh?.close().catch(() => undefined);
}

/** Where a sandbox path leads: the directory holding the entry (held open) and the entry's name. */
export interface Located {
  /** Directory holding the entry; the root itself for `/`. Open: the caller closes it. */
  dir: FileHandle;
  /** Canonical sandbox path segments of `dir`. */
  dirSegs: string[];
  /** The entry's name in `dir`; null for the root. */
  name: string | null;
  /** The entry itself (lstat: a link is not followed), null when it does not exist. */
  st: Stats | null;
  /** The entry does not exist and was named by a symbolic link (a dangling link). */
  dangling: boolean;
}

export interface LocateOptions {
  /** Follow a symbolic link in the last component (read, stat, write) or act on the link itself (delete, move). */
  followLast: boolean;
  /** Create missing parent directories (write, move target). */
  create: boolean;
}

/** The host directory of one sandbox, and the resolver of sandbox paths inside it. */
export class SandboxRoot {
  private real: string | undefined;

  constructor(readonly dir: string) {}

  /** Real host path of the root; not_found when the runtime directory is gone. */
  async realPath(): Promise<string> {
    if (this.real === undefined) {
      try {
        this.real = await realpath(this.dir);
      } catch {
        throw notFound('sandbox runtime not found');
      }
    }
    return this.real;
  }

  /** Opens the directory at canonical segments, refusing any symbolic link on the way. */
  async open(segs: readonly string[] = []): Promise<FileHandle> {
    if (process.platform !== 'linux') throw providerError('host-backed sandboxes need Linux (/proc/self/fd) for file access');
    let cur: FileHandle;
    try {
      cur = await open(await this.realPath(), DIR_HANDLE);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') throw notFound('sandbox runtime not found');
      throw err;
    }
    for (const s of segs) {
      let next: FileHandle;
      try {
        next = await openDirAt(cur, s);
      } finally {
        // Closed either way: on success `next` replaces it, on failure nothing holds it.
        await closeQuietly(cur);
      }
      cur = next;
    }
    return cur;
  }

  /**
   * Resolves sandbox path segments (already validated: no `.`/`..`, no empty names) to an open
   * parent directory and a name. Symbolic links are followed only while they stay inside the root;
   * one that leaves it is a bad_request. Missing intermediate directories are not_found, or
   * created with `create`.
   */
  async locate(p: string, segs: readonly string[], opts: LocateOptions): Promise<Located> {
    const pending = segs.map((name) => ({ name, fromLink: false })).reverse();
    let stack: string[] = [];
    let cur = await this.open();
    let hops = 0;
    let retries = 0; // of one component that changes between looking at it and opening it
    let handedOver = false;
    const moveTo = async (next: FileHandle) => {
      await closeQuietly(cur);
      cur = next;
    };
    const located = async (name: string | null, st: Stats | null, dangling: boolean): Promise<Located> => {
      if (name === null && stack.length > 0) {
        // A link ending in `.` or `..` named a directory: describe it from its parent.
        name = stack.pop()!;
        await moveTo(await this.open(stack));
        st = await lstatAt(cur, name);
      } else if (name === null) {
        st = await cur.stat();
      }
      handedOver = true;
      return { dir: cur, dirSegs: stack, name, st, dangling };
    };
    try {
      while (pending.length > 0) {
        const { name, fromLink } = pending.pop()!;
        if (name === '.') continue;
        if (name === '..') {
          if (stack.length === 0) throw escapes(p);
          stack.pop();
          await moveTo(await this.open(stack));
          continue;
        }
        const last = pending.length === 0;
        const st = await lstatAt(cur, name);
        if (st === null) {
          if (last) return await located(name, null, fromLink);
          if (!opts.create) throw notFound(`${p}: no such file or directory`);
          if (fromLink) throw badRequest(`${p}: a parent is a dangling symbolic link`);
          try {
            await mkdir(at(cur, name), 0o777);
          } catch (err) {
            if (errnoOf(err) !== 'EEXIST') throw err;
          }
          if (++retries > MAX_RETRIES) throw changing(p);
          pending.push({ name, fromLink }); // looked at again: it may have been swapped meanwhile
          continue;
        }
        if (st.isSymbolicLink() && (!last || opts.followLast)) {
          if (++hops > MAX_LINK_HOPS) throw badRequest(`${p}: too many levels of symbolic links`);
          let target = await readlink(at(cur, name));
          const real = await this.realPath();
          if (leaves(target, real, stack.length)) {
            // Never followed. A target that does not exist is a dangling link, as it always was.
            if (!(await hostMissing(target.startsWith('/') ? target : posix.resolve(real, ...stack, target)))) throw escapes(p);
            if (opts.create) throw badRequest(`${p}: ${last ? 'is' : 'a parent is'} a dangling symbolic link`);
            if (last) return await located(name, null, true);
            throw notFound(`${p}: no such file or directory`);
          }
          if (target.startsWith('/')) {
            // An absolute target is a host path (what commands of a host runtime see).
            target = target.slice(real.length);
            stack = [];
            await moveTo(await this.open());
          }
          const parts = target.split('/').filter((s) => s.length > 0);
          for (let i = parts.length - 1; i >= 0; i--) pending.push({ name: parts[i]!, fromLink: true });
          continue;
        }
        if (last) return await located(name, st, false);
        if (!st.isDirectory()) throw badRequest(`${p}: a component of the path is not a directory`);
        let child: FileHandle;
        try {
          child = await openDirAt(cur, name);
        } catch (err) {
          const code = errnoOf(err);
          // Swapped since the lstat (for a link, a file, nothing): look again, as often as links are followed.
          if (code !== 'ENOTDIR' && code !== 'ELOOP' && code !== 'ENOENT') throw err;
          if (++retries > MAX_RETRIES) throw changing(p);
          pending.push({ name, fromLink });
          continue;
        }
        await moveTo(child);
        stack.push(name);
        retries = 0;
      }
      return await located(null, null, false);
    } catch (err) {
      throw fsError(err, p);
    } finally {
      if (!handedOver) await closeQuietly(cur);
    }
  }

  /** Opens the existing directory at a sandbox path (links inside followed); its canonical segments. */
  async openDir(p: string, segs: readonly string[]): Promise<{ dir: FileHandle; segs: string[] }> {
    const loc = await this.locate(p, segs, { followLast: true, create: false });
    if (loc.name === null) return { dir: loc.dir, segs: [] };
    try {
      if (loc.st === null) throw notFound(`${p}: no such file or directory`);
      if (!loc.st.isDirectory()) throw badRequest(`${p} is not a directory`);
      return { dir: await openDirAt(loc.dir, loc.name), segs: [...loc.dirSegs, loc.name] };
    } catch (err) {
      throw errnoOf(err) === 'ENOTDIR' ? badRequest(`${p} is not a directory`) : fsError(err, p);
    } finally {
      await closeQuietly(loc.dir);
    }
  }
}

/** Whether a link target leaves the root, judged on its text (the walk enforces it anyway). */
function leaves(target: string, real: string, depth: number): boolean {
  if (target.startsWith('/')) return target !== real && !target.startsWith(real + '/');
  for (const part of target.split('/')) {
    if (part === '..') depth--;
    else if (part !== '' && part !== '.') depth++;
    if (depth < 0) return true;
  }
  return false;
}

/** True when nothing exists at a host path (checked, never opened or followed). */
async function hostMissing(hostPath: string): Promise<boolean> {
  try {
    await lstat(hostPath);
    return false;
  } catch (err) {
    return errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR';
  }
}

function changing(p: string) {
  return badRequest(`${p} kept changing during the operation`);
}

function escapes(p: string) {
  return badRequest(`${p} leaves the sandbox through a symbolic link`);
}
