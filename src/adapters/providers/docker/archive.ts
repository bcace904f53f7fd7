import type { IncomingMessage } from 'node:http';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { badRequest, isAbortError, isSbxError, notFound, SbxError } from '../../../core/errors.js';
import type { OpenedFile } from '../../../core/ports/index.js';
import { fileTooLarge } from '../../../core/sandboxes/file-bytes.js';
import { bounded, engineMessage, isNotFound, statusOf, toSbxError } from './errors.js';

const MAX_LINK_HOPS = 16;
/** Bound on an archive read until its bytes start (a whole read is bounded end to end by it). */
export const OPEN_TIMEOUT_MS = 120_000;

/** Numeric owner for entries written through the archive API. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * Opens one regular file through the engine archive API (GET /containers/{id}/archive): one
 * engine call. The answer's stat header says what the path is before a byte is read, so a
 * directory or a file over `maxBytes` is refused without transferring it, and a symlink is
 * followed to the target the engine resolved inside the container's own root. The body yields
 * the file's bytes as the engine sends them, exactly `size` of them, or fails.
 */
export async function openViaArchive(
  docker: Docker,
  runtimeId: string,
  path: string,
  maxBytes: number | undefined,
  signal?: AbortSignal,
): Promise<OpenedFile> {
  const container = docker.getContainer(runtimeId);
  let current = path;
  for (let hop = 0; hop <= MAX_LINK_HOPS; hop++) {
    // Bounded until the file's first byte is ready; then the body takes as long as its reader
    // does (a slow client must not be cut off), ended by `signal` or by `return()`.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error('the engine did not answer in time')), OPEN_TIMEOUT_MS);
    try {
      let archive: IncomingMessage;
      try {
        const abortSignal = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
        archive = (await container.getArchive({ path: current, abortSignal })) as unknown as IncomingMessage;
      } catch (err) {
        if (isNotFound(err)) await throwMissingOrGone(docker, runtimeId, path, signal);
        throw toSbxError(err, `read ${path}`);
      }
      const st = statHeader(archive);
      if (st?.isLink && st.linkTarget && st.linkTarget !== current) {
        archive.destroy();
        current = st.linkTarget;
        continue;
      }
      if (st?.isDir) {
        archive.destroy();
        throw badRequest(`${path} is a directory`);
      }
      if (st && maxBytes !== undefined && st.size > maxBytes) {
        archive.destroy();
        throw fileTooLarge(st.size, maxBytes);
      }
      // Without a usable header (an engine that sends none), the tar entry itself tells the same.
      const entry = await firstEntry(archive, path, maxBytes);
      if ('linkname' in entry) {
        current = posix.resolve(posix.dirname(current), entry.linkname);
        continue;
      }
      return entry;
    } finally {
      clearTimeout(timer);
    }
  }
  throw badRequest(`${path}: too many levels of symbolic links`);
}

/**
 * The first entry of an archive: a link to follow, or a regular file whose bytes stream on. A
 * directory or any other kind is refused, as is a file over `maxBytes`.
 */
function firstEntry(archive: Readable, path: string, maxBytes: number | undefined): Promise<OpenedFile | { linkname: string }> {
  return new Promise((resolve, reject) => {
    const extract = tar.extract();
    let settled = false;
    const stop = () => {
      extract.destroy();
      archive.destroy();
    };
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      stop();
      reject(isSbxError(err) ? err : toSbxError(err, `read ${path}`));
    };
    extract.once('entry', (header, stream, next) => {
      if (settled) return;
      const type = header.type ?? 'file';
      if (type === 'symlink') {
        settled = true;
        stop();
        resolve({ linkname: header.linkname ?? '' });
        return;
      }
      if (type === 'directory') return fail(badRequest(`${path} is a directory`));
      if (type !== 'file' && type !== 'contiguous-file') return fail(badRequest(`${path} is not a regular file`));
      const size = header.size ?? 0;
      if (maxBytes !== undefined && size > maxBytes) return fail(fileTooLarge(size, maxBytes));
      settled = true;
      resolve({ size, body: entryBody(stream as unknown as AsyncIterable<Buffer>, size, path, stop, next) });
    });
    extract.on('finish', () => fail(new SbxError('provider_error', `read ${path}: empty archive`)));
    // After the entry was handed on, errors reach its body: destroying the extractor destroys it.
    extract.on('error', fail);
    archive.on('error', (err) => extract.destroy(err));
    archive.pipe(extract);
  });
}

/**
 * One tar entry's bytes, checked against its size. Ending early (`return()`, also before the
 * first read) or failing drops the engine connection; reading to the end lets the archive finish.
 */
function entryBody(
  stream: AsyncIterable<Buffer>,
  size: number,
  path: string,
  stop: () => void,
  next: () => void,
): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = stream[Symbol.asyncIterator]();
      let got = 0;
      let ended = false;
      const end = (complete: boolean) => {
        if (ended) return;
        ended = true;
        if (complete) next();
        else stop();
      };
      return {
        async next(): Promise<IteratorResult<Uint8Array>> {
          let r: IteratorResult<Buffer>;
          try {
            r = await it.next();
          } catch (err) {
            end(false);
            throw isSbxError(err) ? err : toSbxError(err, `read ${path}`);
          }
          if (!r.done) {
            got += r.value.byteLength;
            return r;
          }
          end(got === size);
          if (got !== size) throw new SbxError('provider_error', `read ${path}: the engine sent ${got} of ${size} bytes`);
          return { done: true, value: undefined };
        },
        async return(): Promise<IteratorResult<Uint8Array>> {
          end(false);
          return { done: true, value: undefined };
        },
      };
    },
  };
}

/**
 * Writes one file through the engine archive API (PUT /containers/{id}/archive) into its parent
 * directory, with mode, mtime and owner in the tar header. The parent is created with `mkdirP`
 * only when the first attempt finds it missing, so the common case is one engine call.
 */
export async function writeViaArchive(
  docker: Docker,
  runtimeId: string,
  path: string,
  content: Uint8Array,
  mode: number,
  mkdirP: (dir: string) => Promise<void>,
  opts: { owner?: Owner; signal?: AbortSignal },
): Promise<void> {
  const dir = posix.dirname(path);
  const body = await tarOne({ name: posix.basename(path), mode, size: content.byteLength, type: 'file', ...opts.owner }, content);
  const container = docker.getContainer(runtimeId);
  const put = () =>
    container.putArchive(body(), {
      path: dir,
      noOverwriteDirNonDir: true,
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

/**
 * Creates one directory through the archive API, or gives an existing one this mode and owner
 * (extraction applies a directory entry's metadata to a directory already there). This is how
 * /workspace becomes a non-root user's before the container starts: with every capability
 * dropped, nothing inside the container could chown it.
 */
export async function putDirectory(
  docker: Docker,
  containerId: string,
  path: string,
  mode: number,
  owner: Owner,
  signal?: AbortSignal,
): Promise<void> {
  const body = await tarOne({ name: posix.basename(path), mode, type: 'directory', ...owner });
  await docker.getContainer(containerId).putArchive(body(), { path: posix.dirname(path), abortSignal: bounded(signal) });
}

function writeError(err: unknown, path: string, retried = false): SbxError {
  const status = statusOf(err);
  const text = engineMessage(err);
  if (status === 400 || (status === 500 && /cannot overwrite|not a directory|extraction point/i.test(text))) {
    return badRequest(`cannot write ${path}: a directory or a file is in the way`);
  }
  if (status === 403 || /read-only/i.test(text)) return badRequest(`cannot write ${path}: the filesystem is read-only`);
  // The parent exists (we just made it) yet the engine cannot see it: a mount like /proc or a tmpfs.
  if (status === 404 && retried) return badRequest(`cannot write ${path}: the location is not writable`);
  return toSbxError(err, `write ${path}`);
}

// Below this a tar is joined into one buffer: one write with a Content-Length beats a chunked
// stream of three parts. Above it the parts are streamed, so the content is never copied.
const JOIN_BELOW = 256 * 1024;

interface EntryHeader {
  name: string;
  type: 'file' | 'directory';
  mode: number;
  size?: number;
  uid?: number;
  gid?: number;
}

/** A one-entry tar, as a factory of request bodies (one per attempt). */
function tarOne(header: EntryHeader, content?: Uint8Array): Promise<() => Buffer | Readable> {
  return new Promise((resolve, reject) => {
    const pack = tar.pack();
    const parts: Buffer[] = [];
    pack.on('data', (c: unknown) => parts.push(c as Buffer));
    pack.on('end', () => {
      if ((content?.byteLength ?? 0) < JOIN_BELOW) {
        const joined = Buffer.concat(parts);
        resolve(() => joined);
      } else {
        resolve(() => Readable.from(parts, { objectMode: false }));
      }
    });
    pack.on('error', reject);
    const done = (err?: Error | null) => {
      if (err) reject(err);
      else pack.finalize();
    };
    const entry = { mtime: new Date(), ...header };
    if (content) pack.entry(entry, Buffer.from(content.buffer, content.byteOffset, content.byteLength), done);
    else pack.entry(entry, done);
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
  return statHeader(res);
}

/** The path's lstat from the `X-Docker-Container-Path-Stat` header of an archive HEAD or GET. */
function statHeader(res: IncomingMessage): PathStat | undefined {
  const header = res.headers['x-docker-container-path-stat'];
  if (typeof header !== 'string') return undefined;
  try {
    const st = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as {
      size?: number;
      mode?: number;
      mtime?: string;
      linkTarget?: string;
    };
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

/**
 * Permission bits of the file a write would replace, so an overwrite without a mode keeps them.
 * Undefined for a missing path, and for a link or a directory, which the write replaces or refuses.
 */
export async function existingMode(docker: Docker, runtimeId: string, path: string, signal?: AbortSignal): Promise<number | undefined> {
  const st = await pathStat(docker, runtimeId, path, signal);
  return st && !st.isDir && !st.isLink ? st.perm : undefined;
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
