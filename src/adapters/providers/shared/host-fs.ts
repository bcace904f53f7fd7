import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { chmod, open, readdir, rename, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, posix } from 'node:path';
import { badRequest, notFound, SbxError } from '../../../core/errors.js';
import type { FileInfo } from '../../../core/ports/index.js';
import { fileTooLarge } from '../../../core/sandboxes/file-bytes.js';
import { MAX_NAME_BYTES } from '../../../core/sandboxes/paths.js';
import { formatMode } from './file-mode.js';
import { planGlob } from './glob.js';
import { errnoOf, fsError } from './host-fs/errors.js';
import { globTree, removeTree } from './host-fs/tree.js';
import { at, closeQuietly, lstatAt, O_PATH, openDirAt, SandboxRoot, type Located } from './host-fs/walk.js';

/** Symbolic links among a listing's entries resolved at once (each holds a few handles while it resolves). */
const LINK_RESOLVE_BATCH = 16;
const encoder = new TextEncoder();

function segmentsOf(p: string): string[] {
  if (!p.startsWith('/')) throw badRequest(`path must be absolute: ${JSON.stringify(p)}`);
  if (p.includes('\0')) throw badRequest('path must not contain NUL bytes');
  const segs = p.split('/').filter((s) => s.length > 0);
  if (segs.some((s) => s === '.' || s === '..')) throw badRequest(`path must be normalized: ${JSON.stringify(p)}`);
  if (segs.some((s) => encoder.encode(s).length > MAX_NAME_BYTES))
    throw badRequest(`path has a component longer than ${MAX_NAME_BYTES} bytes`);
  return segs;
}

function toInfo(p: string, st: Stats): FileInfo {
  return {
    name: p === '/' ? '/' : posix.basename(p),
    path: p,
    size: st.size,
    is_dir: st.isDirectory(),
    mod_time: st.mtime.toISOString(),
    mode: formatMode(st.mode),
  };
}

/**
 * Writes `content` (bytes, or chunks as they arrive) under a temporary name in `dir`, then renames
 * it over `name`: a failed or abandoned write leaves the old file and no temporary one.
 */
async function writeReplacing(
  dir: FileHandle,
  name: string,
  content: Uint8Array | AsyncIterable<Uint8Array>,
  mode: () => number,
): Promise<void> {
  const tmp = `.sbx-write-${randomBytes(8).toString('hex')}.tmp`;
  const fh = await open(at(dir, tmp), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  let renamed = false;
  try {
    try {
      if (content instanceof Uint8Array) await fh.writeFile(content);
      else for await (const chunk of content) await fh.write(chunk);
      // Explicit modes, not umask-dependent ones.
      await fh.chmod(mode());
    } finally {
      await fh.close();
    }
    // rename replaces the entry `name` (a link there is replaced, not followed).
    await rename(at(dir, tmp), at(dir, name));
    renamed = true;
  } finally {
    if (!renamed) await unlink(at(dir, tmp)).catch(() => undefined);
  }
}

/**
 * File operations for providers whose sandbox root is a host directory (mock, proot). Every path
 * is resolved from a handle on the root, one component at a time, without the kernel following
 * any symbolic link (see host-fs/walk.ts): links are followed by this code only while they stay
 * inside the root, so neither a link planted in the sandbox nor one swapped in while an operation
 * runs reaches the host. Linux only (it relies on /proc/self/fd).
 */
export class HostFs {
  private readonly root: SandboxRoot;

  constructor(readonly rootDir: string) {
    this.root = new SandboxRoot(rootDir);
  }

  async writeFile(p: string, content: Uint8Array, mode: number | undefined): Promise<void> {
    return this.writeFileStream(p, content, () => mode);
  }

  /** A write whose bytes may arrive as a stream (Provider.writeFileStream); `mode` is read once they all have. */
  async writeFileStream(p: string, content: Uint8Array | AsyncIterable<Uint8Array>, mode: () => number | undefined): Promise<void> {
    const segs = segmentsOf(p);
    if (segs.length === 0) throw badRequest('cannot write the sandbox root');
    await this.withEntry(p, segs, { followLast: true, create: true }, async (loc) => {
      if (loc.name === null) throw badRequest('cannot write the sandbox root');
      if (loc.dangling) throw badRequest(`${p} is a dangling symbolic link`);
      if (loc.st?.isDirectory()) throw badRequest(`${p} is a directory`);
      // An overwrite without a mode keeps the old one; a new file gets 0644 whatever the umask.
      const old = loc.st ? loc.st.mode & 0o7777 : 0o644;
      await writeReplacing(loc.dir, loc.name, content, () => {
        const m = mode();
        return m !== undefined ? m & 0o7777 : old;
      });
    });
  }

  async readFile(p: string, maxBytes?: number): Promise<Uint8Array> {
    return this.withEntry(p, segmentsOf(p), { followLast: true, create: false }, async (loc) => {
      if (loc.name === null || loc.st?.isDirectory()) throw badRequest(`${p} is a directory`);
      if (loc.st === null) throw notFound(`${p}: no such file or directory`);
      // O_NONBLOCK: a FIFO planted in the sandbox cannot stall the open; it is refused below.
      const fh = await open(at(loc.dir, loc.name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(swapped(p));
      try {
        // Sized on the open file, so the size checked is the size read.
        const st = await fh.stat();
        if (st.isDirectory()) throw badRequest(`${p} is a directory`);
        if (!st.isFile()) throw badRequest(`${p} is not a regular file`);
        if (maxBytes !== undefined && st.size > maxBytes) throw fileTooLarge(st.size, maxBytes);
        return await fh.readFile();
      } finally {
        await fh.close();
      }
    });
  }

  async deleteFile(p: string, recursive: boolean): Promise<void> {
    const segs = segmentsOf(p);
    if (segs.length === 0) throw badRequest('the sandbox root cannot be deleted or moved');
    await this.withEntry(p, segs, { followLast: false, create: false }, async (loc) => {
      if (loc.name === null || loc.st === null) throw notFound(`${p}: no such file or directory`);
      try {
        if (!loc.st.isDirectory()) await unlink(at(loc.dir, loc.name));
        else if (recursive) await removeTree(loc.dir, loc.name);
        else await rmdir(at(loc.dir, loc.name));
      } catch (err) {
        if (errnoOf(err) === 'ENOTEMPTY' || errnoOf(err) === 'EEXIST') {
          throw badRequest(
            recursive
              ? `${p} kept getting new entries while it was deleted`
              : `${p} is a directory that is not empty; delete it recursively`,
          );
        }
        throw err;
      }
    });
  }

  async listFiles(p: string): Promise<FileInfo[]> {
    const { dir, segs } = await this.root.openDir(p, segmentsOf(p));
    try {
      const names = (await readdir(at(dir))).sort();
      const infos: (FileInfo | null)[] = [];
      for (let i = 0; i < names.length; i += LINK_RESOLVE_BATCH) {
        const batch = names.slice(i, i + LINK_RESOLVE_BATCH);
        infos.push(...(await Promise.all(batch.map((n) => this.entryInfo(dir, segs, n, posix.join(p, n))))));
      }
      return infos.filter((i): i is FileInfo => i !== null);
    } catch (err) {
      throw fsError(err, p);
    } finally {
      await closeQuietly(dir);
    }
  }

  async moveFile(from: string, to: string): Promise<void> {
    const fromSegs = segmentsOf(from);
    const toSegs = segmentsOf(to);
    if (fromSegs.length === 0) throw badRequest('the sandbox root cannot be deleted or moved');
    if (toSegs.length === 0) throw badRequest('cannot move onto the sandbox root');
    await this.withEntry(from, fromSegs, { followLast: false, create: false }, async (src) => {
      if (src.name === null || src.st === null) throw notFound(`${from}: no such file or directory`);
      const srcName = src.name;
      await this.withEntry(to, toSegs, { followLast: false, create: true }, async (dst) => {
        if (dst.name === null) throw badRequest('cannot move onto the sandbox root');
        await rename(at(src.dir, srcName), at(dst.dir, dst.name));
      });
    });
  }

  async chmod(p: string, mode: number): Promise<void> {
    await this.withEntry(p, segmentsOf(p), { followLast: true, create: false }, async (loc) => {
      if (loc.st === null) throw notFound(`${p}: no such file or directory`);
      if (loc.name === null) return void (await chmod(at(loc.dir), mode & 0o7777));
      // A handle on the entry itself; chmod through it acts on exactly what was checked.
      const fh = await open(at(loc.dir, loc.name), O_PATH | constants.O_NOFOLLOW).catch(swapped(p));
      try {
        if ((await fh.stat()).isSymbolicLink()) throw badRequest(`${p} was replaced by a symbolic link during the operation`);
        await chmod(at(fh), mode & 0o7777);
      } finally {
        await fh.close();
      }
    });
  }

  async stat(p: string): Promise<FileInfo> {
    return this.withEntry(p, segmentsOf(p), { followLast: true, create: false }, async (loc) => {
      if (loc.st === null) throw notFound(`${p}: no such file or directory`);
      return toInfo(p, loc.st);
    });
  }

  /** Sorted sandbox paths matching the pattern; symlinked directories are not descended into. */
  async glob(pattern: string): Promise<string[]> {
    const plan = planGlob(pattern);
    await closeQuietly(await this.root.open()); // a runtime that is gone is an error, not an empty match
    let loc: Located;
    try {
      loc = await this.root.locate(plan.base, segmentsOf(plan.base), { followLast: true, create: false });
    } catch (err) {
      // A base that leaves the sandbox, or does not exist, matches nothing inside it.
      if (err instanceof SbxError && (err.code === 'bad_request' || err.code === 'not_found')) return [];
      throw err;
    }
    try {
      if (loc.st === null) return [];
      const out: string[] = [];
      if (plan.regex.test(plan.base)) out.push(plan.base);
      if (plan.depth > 0 && loc.st.isDirectory()) {
        const dir = loc.name === null ? loc.dir : await openDirAt(loc.dir, loc.name).catch(() => null);
        if (dir !== null) {
          try {
            out.push(...(await globTree(dir, plan.base, plan, pattern)));
          } finally {
            if (dir !== loc.dir) await closeQuietly(dir);
          }
        }
      }
      return out.sort();
    } catch (err) {
      throw fsError(err, pattern);
    } finally {
      await closeQuietly(loc.dir);
    }
  }

  /** Host path of an existing directory inside the sandbox (an exec working directory). */
  async hostDir(p: string): Promise<string> {
    const real = await this.root.realPath();
    let segs: string[];
    try {
      const d = await this.root.openDir(p, segmentsOf(p));
      await closeQuietly(d.dir);
      segs = d.segs;
    } catch {
      throw badRequest(`workdir ${p} is not an existing directory in the sandbox`);
    }
    return join(real, ...segs);
  }

  /**
   * Removes the whole sandbox root the way a recursive delete removes a tree: by handle, never
   * following a link, so a process still running inside cannot redirect it. Idempotent.
   */
  async removeRoot(): Promise<void> {
    let real: string;
    try {
      real = await this.root.realPath();
    } catch {
      return; // already gone
    }
    const parent = await open(dirname(real), O_PATH | constants.O_DIRECTORY);
    try {
      await removeTree(parent, basename(real));
    } catch (err) {
      throw fsError(err, '/');
    } finally {
      await parent.close();
    }
  }

  /** True when the sandbox root directory exists. */
  async rootExists(): Promise<boolean> {
    return (await stat(this.rootDir).catch(() => null))?.isDirectory() ?? false;
  }

  /** Runs `fn` on the located path, mapping fs errors to the sandbox path and closing the handle. */
  private async withEntry<T>(
    p: string,
    segs: string[],
    opts: { followLast: boolean; create: boolean },
    fn: (loc: Located) => Promise<T>,
  ): Promise<T> {
    const loc = await this.root.locate(p, segs, opts);
    try {
      return await fn(loc);
    } catch (err) {
      throw fsError(err, p);
    } finally {
      await closeQuietly(loc.dir);
    }
  }

  /** FileInfo of a directory entry; a symlink shows its target only when that stays inside. */
  private async entryInfo(dir: FileHandle, dirSegs: string[], name: string, p: string): Promise<FileInfo | null> {
    try {
      const st = await lstatAt(dir, name);
      if (st === null) return null; // removed while listing
      if (!st.isSymbolicLink()) return toInfo(p, st);
      const target = await this.root
        .locate(p, [...dirSegs, name], { followLast: true, create: false })
        .then(async (loc) => (await closeQuietly(loc.dir), loc.st))
        .catch(() => null);
      return toInfo(p, target && !target.isSymbolicLink() ? target : st);
    } catch {
      return null;
    }
  }
}

/** An entry that was checked, then swapped for a symbolic link before it was opened. */
function swapped(p: string) {
  return (err: unknown): never => {
    if (errnoOf(err) === 'ELOOP') throw badRequest(`${p} was replaced by a symbolic link during the operation`);
    throw err;
  };
}
