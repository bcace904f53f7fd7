import { constants, type Stats } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, realpath, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, posix, sep } from 'node:path';
import { badRequest, notFound, providerError, SbxError } from '../../../core/errors.js';
import type { FileInfo } from '../../../core/ports.js';
import { fileTooLarge } from '../../../core/sandboxes/files.js';
import { formatMode } from './file-mode.js';
import { planGlob } from './glob.js';

/** Upper bound on directory entries one glob may visit, so a pattern over `/` stays cheap. */
const GLOB_MAX_VISITS = 200_000;

interface Resolved {
  /** Host path: the real path of the deepest existing ancestor, then the missing components. */
  host: string;
  /** Real path of the sandbox root. */
  root: string;
  exists: boolean;
  /** The first missing component exists as a symlink whose target does not (following it could leave the root). */
  dangling: boolean;
}

function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? (err as NodeJS.ErrnoException).code : undefined;
}

/** Maps a Node fs error to an SbxError naming the sandbox path only (never the host path). */
function fsError(err: unknown, p: string): SbxError {
  if (err instanceof SbxError) return err;
  const code = errnoOf(err);
  switch (code) {
    case 'ENOENT':
      return notFound(`${p}: no such file or directory`);
    case 'ENOTDIR':
      return badRequest(`${p}: a component of the path is not a directory`);
    case 'EISDIR':
      return badRequest(`${p} is a directory`);
    case 'ENOTEMPTY':
      return badRequest(`${p} is a directory that is not empty`);
    case 'EEXIST':
      return badRequest(`${p} already exists`);
    case 'ELOOP':
      return badRequest(`${p}: too many levels of symbolic links`);
    case 'EACCES':
    case 'EPERM':
      return badRequest(`${p}: permission denied`);
    case 'EINVAL':
      return badRequest(`${p}: invalid operation`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new SbxError('resource_limit', 'no space left for the sandbox');
    default:
      return providerError(`file operation on ${p} failed (${code ?? 'unknown error'})`);
  }
}

function segmentsOf(p: string): string[] {
  if (!p.startsWith('/')) throw badRequest(`path must be absolute: ${JSON.stringify(p)}`);
  const segs = p.split('/').filter((s) => s.length > 0);
  if (segs.some((s) => s === '.' || s === '..')) throw badRequest(`path must be normalized: ${JSON.stringify(p)}`);
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
 * File operations for providers whose sandbox root is a host directory. Every sandbox path is
 * confined to the root: the deepest existing ancestor is resolved with realpath and must stay under
 * the root's real path, so neither `..` nor a symlink planted inside the sandbox reaches the host.
 */
export class HostFs {
  constructor(readonly rootDir: string) {}

  async writeFile(p: string, content: Uint8Array, mode: number | undefined): Promise<void> {
    const r = await this.resolve(p);
    if (r.dangling) throw badRequest(`${p} is a dangling symbolic link`);
    if (r.host === r.root) throw badRequest('cannot write the sandbox root');
    try {
      await mkdir(dirname(r.host), { recursive: true });
      // O_NOFOLLOW: the resolved path is real, so a symlink here means someone swapped it in since.
      const fh = await open(r.host, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
      try {
        await fh.writeFile(content);
        // Explicit modes, not umask-dependent ones; an overwrite without a mode keeps the old one.
        if (mode !== undefined) await fh.chmod(mode & 0o7777);
        else if (!r.exists) await fh.chmod(0o644);
      } finally {
        await fh.close();
      }
    } catch (err) {
      throw fsError(err, p);
    }
  }

  async readFile(p: string, maxBytes?: number): Promise<Uint8Array> {
    const r = await this.existing(p);
    try {
      const fh = await open(r.host, constants.O_RDONLY);
      try {
        // Sized on the open file, so the size checked is the size read.
        const st = await fh.stat();
        if (st.isDirectory()) throw badRequest(`${p} is a directory`);
        if (maxBytes !== undefined && st.size > maxBytes) throw fileTooLarge(st.size, maxBytes);
        return await fh.readFile();
      } finally {
        await fh.close();
      }
    } catch (err) {
      throw fsError(err, p);
    }
  }

  async deleteFile(p: string, recursive: boolean): Promise<void> {
    const host = await this.entry(p);
    try {
      const st = await lstat(host);
      if (!st.isDirectory()) await unlink(host);
      else if (recursive) await rm(host, { recursive: true, force: false });
      else await rmdir(host);
    } catch (err) {
      if (errnoOf(err) === 'ENOTEMPTY' || errnoOf(err) === 'EEXIST') {
        throw badRequest(`${p} is a directory that is not empty; delete it recursively`);
      }
      throw fsError(err, p);
    }
  }

  async listFiles(p: string): Promise<FileInfo[]> {
    const r = await this.existing(p);
    try {
      if (!(await stat(r.host)).isDirectory()) throw badRequest(`${p} is not a directory`);
      const names = (await readdir(r.host)).sort();
      const infos = await Promise.all(names.map((n) => this.entryInfo(join(r.host, n), posix.join(p, n), r.root)));
      return infos.filter((i): i is FileInfo => i !== null);
    } catch (err) {
      throw fsError(err, p);
    }
  }

  async moveFile(from: string, to: string): Promise<void> {
    const src = await this.entry(from);
    try {
      await lstat(src);
    } catch (err) {
      throw fsError(err, from);
    }
    const segs = segmentsOf(to);
    const name = segs.pop();
    if (name === undefined) throw badRequest('cannot move onto the sandbox root');
    const parent = await this.resolve('/' + segs.join('/'));
    if (parent.dangling) throw badRequest(`${to}: a parent is a dangling symbolic link`);
    try {
      await mkdir(parent.host, { recursive: true });
      await rename(src, join(parent.host, name));
    } catch (err) {
      throw fsError(err, to);
    }
  }

  async chmod(p: string, mode: number): Promise<void> {
    const r = await this.existing(p);
    try {
      await chmod(r.host, mode & 0o7777);
    } catch (err) {
      throw fsError(err, p);
    }
  }

  async stat(p: string): Promise<FileInfo> {
    const r = await this.existing(p);
    try {
      return toInfo(p, await stat(r.host));
    } catch (err) {
      throw fsError(err, p);
    }
  }

  /** Sorted sandbox paths matching the pattern; symlinked directories are not descended into. */
  async glob(pattern: string): Promise<string[]> {
    const plan = planGlob(pattern);
    let base: Resolved;
    try {
      base = await this.resolve(plan.base);
    } catch (err) {
      // A base that leaves the sandbox matches nothing inside it.
      if (err instanceof SbxError && err.code === 'bad_request') return [];
      throw err;
    }
    if (!base.exists) return [];
    const out: string[] = [];
    if (plan.regex.test(plan.base)) out.push(plan.base);
    let visits = 0;
    const walk = async (hostDir: string, sbxDir: string, level: number): Promise<void> => {
      let entries;
      try {
        entries = await readdir(hostDir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const d of entries) {
        if (++visits > GLOB_MAX_VISITS) throw badRequest(`glob ${pattern} visits more than ${GLOB_MAX_VISITS} entries; narrow it`);
        const sp = posix.join(sbxDir, d.name);
        if (plan.regex.test(sp)) out.push(sp);
        if (d.isDirectory() && level < plan.depth) await walk(join(hostDir, d.name), sp, level + 1);
      }
    };
    if (plan.depth > 0) await walk(base.host, plan.base, 1);
    return out.sort();
  }

  /** Host path of an existing directory inside the sandbox (an exec working directory). */
  async hostDir(p: string): Promise<string> {
    const r = await this.resolve(p);
    let isDir = false;
    if (r.exists) isDir = (await stat(r.host).catch(() => null))?.isDirectory() ?? false;
    if (!isDir) throw badRequest(`workdir ${p} is not an existing directory in the sandbox`);
    return r.host;
  }

  /** True when the sandbox root directory exists. */
  async rootExists(): Promise<boolean> {
    return (await stat(this.rootDir).catch(() => null))?.isDirectory() ?? false;
  }

  private async rootReal(): Promise<string> {
    try {
      return await realpath(this.rootDir);
    } catch {
      throw notFound('sandbox runtime not found');
    }
  }

  private async resolve(p: string): Promise<Resolved> {
    const root = await this.rootReal();
    const segs = segmentsOf(p);
    for (let k = segs.length; k >= 0; k--) {
      let real: string;
      try {
        real = await realpath(join(root, ...segs.slice(0, k)));
      } catch (err) {
        const code = errnoOf(err);
        if (code === 'ENOENT' || code === 'ENOTDIR') continue;
        throw fsError(err, p);
      }
      if (real !== root && !real.startsWith(root + sep)) {
        throw badRequest(`${p} leaves the sandbox through a symbolic link`);
      }
      const tail = segs.slice(k);
      const dangling = tail.length > 0 && (await lstat(join(real, tail[0]!)).then(() => true, () => false));
      return { host: join(real, ...tail), root, exists: tail.length === 0, dangling };
    }
    throw notFound('sandbox runtime not found');
  }

  private async existing(p: string): Promise<Resolved> {
    const r = await this.resolve(p);
    if (!r.exists) throw notFound(`${p}: no such file or directory`);
    return r;
  }

  /** Host path of the entry itself (a symlink is not followed): its parent resolved and confined. */
  private async entry(p: string): Promise<string> {
    const segs = segmentsOf(p);
    const name = segs.pop();
    if (name === undefined) throw badRequest('the sandbox root cannot be deleted or moved');
    const parent = await this.existing('/' + segs.join('/'));
    return join(parent.host, name);
  }

  /** FileInfo of a directory entry; a symlink shows its target only when that stays inside. */
  private async entryInfo(host: string, p: string, root: string): Promise<FileInfo | null> {
    try {
      const st = await lstat(host);
      if (!st.isSymbolicLink()) return toInfo(p, st);
      const real = await realpath(host).catch(() => null);
      if (real !== null && (real === root || real.startsWith(root + sep))) return toInfo(p, await stat(real));
      return toInfo(p, st);
    } catch {
      return null; // removed while listing
    }
  }
}
