import type { IncomingMessage } from 'node:http';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { badRequest, isAbortError, notFound, SbxError } from '../../../core/errors.js';
import { bounded, isNotFound, statusOf, toSbxError } from './errors.js';

const MAX_LINK_HOPS = 16;

/**
 * Reads one regular file through the engine archive API (GET /containers/{id}/archive): a tar
 * with one entry, bytes untouched. Symlinks are resolved inside the container's own root, by the
 * same rules the kernel would apply there.
 */
export async function readViaArchive(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<Uint8Array> {
  const container = docker.getContainer(runtimeId);
  let current = path;
  for (let hop = 0; hop <= MAX_LINK_HOPS; hop++) {
    let archive: Readable;
    try {
      archive = (await container.getArchive({ path: current, abortSignal: bounded(signal, 120_000) })) as unknown as Readable;
    } catch (err) {
      if (isNotFound(err)) await throwMissingOrGone(docker, runtimeId, path, signal);
      throw toSbxError(err, `read ${path}`);
    }
    const entry = await firstEntry(archive, path);
    if (entry.type === 'symlink') {
      const target = entry.linkname ?? '';
      current = posix.resolve(posix.dirname(current), target);
      continue;
    }
    if (entry.type === 'directory') throw badRequest(`${path} is a directory`);
    if (entry.type !== 'file') throw badRequest(`${path} is not a regular file`);
    return entry.data;
  }
  throw badRequest(`${path}: too many levels of symbolic links`);
}

interface Extracted {
  type: string;
  linkname?: string;
  data: Uint8Array;
}

function firstEntry(archive: Readable, path: string): Promise<Extracted> {
  return new Promise<Extracted>((resolve, reject) => {
    const extract = tar.extract();
    let result: Extracted | undefined;
    extract.on('entry', (header, stream, next) => {
      if (result) {
        // A directory archive streams its whole content: we only wanted the header.
        stream.resume();
        extract.destroy();
        archive.destroy();
        resolve(result);
        return;
      }
      const chunks: Buffer[] = [];
      const isFile = header.type === 'file' || header.type === 'contiguous-file';
      stream.on('data', (c: unknown) => {
        if (isFile) chunks.push(c as Buffer);
      });
      stream.on('end', () => {
        result = { type: isFile ? 'file' : (header.type ?? 'file'), linkname: header.linkname ?? undefined, data: Buffer.concat(chunks) };
        if (header.type === 'directory') {
          extract.destroy();
          archive.destroy();
          resolve(result);
          return;
        }
        next();
      });
    });
    extract.on('finish', () => (result ? resolve(result) : reject(new SbxError('provider_error', `read ${path}: empty archive`))));
    extract.on('error', (err) => (result ? resolve(result) : reject(toSbxError(err, `read ${path}`))));
    archive.on('error', (err) => (result ? resolve(result) : reject(toSbxError(err, `read ${path}`))));
    archive.pipe(extract);
  });
}

/**
 * Writes one file through the engine archive API (PUT /containers/{id}/archive) into its parent
 * directory, with mode and mtime in the tar header. The parent is created with `mkdirP` only when
 * the first attempt finds it missing, so the common case is one engine call.
 */
export async function writeViaArchive(
  docker: Docker,
  runtimeId: string,
  path: string,
  content: Uint8Array,
  mode: number,
  mkdirP: (dir: string) => Promise<void>,
  opts: { copyUidGid: boolean; signal?: AbortSignal },
): Promise<void> {
  const dir = posix.dirname(path);
  const name = posix.basename(path);
  const parts = await packOne(name, content, mode);
  const container = docker.getContainer(runtimeId);
  const put = () =>
    // A fresh stream per attempt over the same parts: the content is sent as is, never copied.
    container.putArchive(Readable.from(parts, { objectMode: false }), {
      path: dir,
      noOverwriteDirNonDir: true,
      ...(opts.copyUidGid ? { copyUIDGID: true } : {}),
      abortSignal: bounded(opts.signal, 120_000),
    });
  try {
    await put();
    return;
  } catch (err) {
    if (!isNotFound(err)) throw writeError(err, path);
  }
  await mkdirP(dir);
  try {
    await put();
  } catch (err) {
    throw writeError(err, path, true);
  }
}

function writeError(err: unknown, path: string, retried = false): SbxError {
  const status = statusOf(err);
  // The engine's text only classifies here; it never reaches the caller.
  const text = String((err as { json?: { message?: unknown } } | null)?.json?.message ?? '');
  if (status === 400 || (status === 500 && /cannot overwrite|not a directory|extraction point/i.test(text))) {
    return badRequest(`cannot write ${path}: a directory or a file is in the way`);
  }
  if (status === 403 || /read-only/i.test(text)) return badRequest(`cannot write ${path}: the filesystem is read-only`);
  // The parent exists (we just made it) yet the engine cannot see it: a mount like /proc or a tmpfs.
  if (status === 404 && retried) return badRequest(`cannot write ${path}: the location is not writable`);
  return toSbxError(err, `write ${path}`);
}

/**
 * A one-entry tar as its parts (header, the content itself, padding and end blocks), so a large
 * file is not copied into one more buffer of its size before it goes to the engine.
 */
function packOne(name: string, content: Uint8Array, mode: number): Promise<Buffer[]> {
  return new Promise<Buffer[]>((resolve, reject) => {
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on('data', (c: unknown) => chunks.push(c as Buffer));
    pack.on('end', () => resolve(chunks));
    pack.on('error', reject);
    pack.entry({ name, mode, mtime: new Date(), size: content.byteLength, type: 'file' }, Buffer.from(content.buffer, content.byteOffset, content.byteLength), (err) => {
      if (err) reject(err);
      else pack.finalize();
    });
  });
}

// Go's os.FileMode keeps the type and special bits apart from the unix permission bits.
const GO_DIR = 2 ** 31;
const GO_SYMLINK = 1 << 27;
const GO_SETUID = 1 << 23;
const GO_SETGID = 1 << 22;
const GO_STICKY = 1 << 20;

export interface PathStat {
  size: number;
  /** Permission and special bits, unix layout (0o7777). */
  perm: number;
  isDir: boolean;
  isLink: boolean;
  mtime: Date;
  /** For a link: the fully resolved absolute path inside the container. */
  linkTarget: string;
}

/**
 * lstat of a path through the archive API's HEAD: one engine call, no process spawned. Undefined
 * when the engine cannot say (missing path, a mount it does not see such as /proc or a tmpfs,
 * container gone); callers fall back to an exec, which also tells those cases apart.
 */
export async function pathStat(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<PathStat | undefined> {
  let res: IncomingMessage;
  try {
    res = (await docker.getContainer(runtimeId).infoArchive({ path, abortSignal: bounded(signal) })) as unknown as IncomingMessage;
  } catch (err) {
    if (signal?.aborted && isAbortError(err)) throw err;
    return undefined;
  }
  res.resume();
  const header = res.headers['x-docker-container-path-stat'];
  if (typeof header !== 'string') return undefined;
  try {
    const st = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { size?: number; mode?: number; mtime?: string; linkTarget?: string };
    if (typeof st.mode !== 'number' || typeof st.size !== 'number') return undefined;
    const m = st.mode >>> 0;
    const mtime = new Date(st.mtime ?? '');
    if (Number.isNaN(mtime.getTime())) return undefined;
    return {
      size: st.size,
      perm: (m & 0o777) | (m & GO_SETUID ? 0o4000 : 0) | (m & GO_SETGID ? 0o2000 : 0) | (m & GO_STICKY ? 0o1000 : 0),
      isDir: (m & GO_DIR) !== 0,
      isLink: (m & GO_SYMLINK) !== 0,
      mtime,
      linkTarget: st.linkTarget ?? '',
    };
  } catch {
    return undefined;
  }
}

/** stat(2) through the archive API: follows links (bounded); undefined when it cannot tell. */
export async function statViaArchive(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<PathStat | undefined> {
  let current = path;
  for (let hop = 0; hop <= MAX_LINK_HOPS; hop++) {
    const st = await pathStat(docker, runtimeId, current, signal);
    if (!st || !st.isLink) return st;
    if (!st.linkTarget || st.linkTarget === current) return undefined;
    current = st.linkTarget;
  }
  return undefined;
}

/** Permission bits of an existing entry, so an overwrite without a mode keeps the file's mode. */
export async function existingMode(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<number | undefined> {
  // Missing, or something odd in the way: the write itself reports what is wrong.
  return (await pathStat(docker, runtimeId, path, signal))?.perm;
}

/** After a 404 from the archive API: tell a missing path (not_found) from a missing container. */
async function throwMissingOrGone(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<never> {
  try {
    await docker.getContainer(runtimeId).inspect({ abortSignal: bounded(signal) });
  } catch (err) {
    throw toSbxError(err, `read ${path}`);
  }
  throw notFound(`${path} not found`);
}
