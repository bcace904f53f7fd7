import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { isSbxError, SbxError } from '../../../core/errors.js';
import type { FileInfo } from '../../../core/ports/index.js';
import type { EnvdDeps } from './deps.js';
import { toConnectError } from './errors.js';
import { actsAs, makeDirAsUser, moveAsUser, removeAsUser } from './owner.js';
import { type EntryInfoSchema, FileType, type Filesystem } from './gen/filesystem/filesystem_pb.js';
import type { EnvdTarget } from './target.js';
import { accountOf, resolvePath, userOf } from './users.js';
import { watchService } from './watch.js';

type Resolve = (ctx: HandlerContext) => Promise<EnvdTarget>;
export type Entry = MessageInitShape<typeof EntryInfoSchema>;

/** Entries one ListDir answers at most (a deep tree is cut there, never read whole into memory). */
const MAX_LIST_ENTRIES = 10_000;

/**
 * E2B's `filesystem.Filesystem` service over sbx's file API (DESIGN.md §14): stat, make dir,
 * move, list dir (with depth), remove; the watch methods over sbx's file watch (§16), or
 * `unimplemented` while it is not wired. Relative paths are under the user's home, as envd has them.
 */
export function filesystemService(deps: EnvdDeps, resolve: Resolve): ServiceImpl<typeof Filesystem> {
  const guard = <A extends unknown[], R>(fn: (...a: A) => Promise<R>) => {
    return async (...a: A): Promise<R> => {
      try {
        return await fn(...a);
      } catch (err) {
        throw toConnectError(err);
      }
    };
  };
  const pathOf = async (t: EnvdTarget, ctx: HandlerContext, path: string) => {
    if (path === '') throw new SbxError('bad_request', 'path is required');
    if (path.startsWith('/')) return path;
    return resolvePath(path, await accountOf(deps, t, userOf(ctx.requestHeader.get('authorization'))));
  };
  return {
    stat: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      return { entry: entryOf(await deps.files.stat(t.rec.id, await pathOf(t, ctx, req.path), t.caller)) };
    }),
    makeDir: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const path = await pathOf(t, ctx, req.path);
      if (await exists(deps, t, path)) throw new ConnectError(`${path} already exists`, Code.AlreadyExists);
      const account = await accountOf(deps, t, userOf(ctx.requestHeader.get('authorization')));
      if (actsAs(account)) await makeDirAsUser(deps, t, account, path);
      else await makeDir(deps, t, path);
      return { entry: entryOf(await deps.files.stat(t.rec.id, path, t.caller)) };
    }),
    move: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const from = await pathOf(t, ctx, req.source);
      const to = await pathOf(t, ctx, req.destination);
      const account = await accountOf(deps, t, userOf(ctx.requestHeader.get('authorization')));
      if (actsAs(account)) {
        await deps.files.stat(t.rec.id, from, t.caller);
        await moveAsUser(deps, t, account, from, to);
      } else await deps.files.move(t.rec.id, from, to, t.caller);
      return { entry: entryOf(await deps.files.stat(t.rec.id, to, t.caller)) };
    }),
    listDir: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const root = await pathOf(t, ctx, req.path);
      return { entries: await listDeep(deps, t, root, Math.max(1, req.depth)) };
    }),
    remove: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const path = await pathOf(t, ctx, req.path);
      await deps.files.stat(t.rec.id, path, t.caller);
      const account = await accountOf(deps, t, userOf(ctx.requestHeader.get('authorization')));
      if (actsAs(account)) await removeAsUser(deps, t, account, path);
      else await deps.files.remove(t.rec.id, path, true, t.caller);
      return {};
    }),
    ...watchService(deps, resolve, pathOf),
  };
}

/**
 * Makes a directory and its parents through the file API alone (no shell needed in the sandbox, the
 * same paths on every provider): a write creates the parents, then the placeholder is removed.
 */
async function makeDir(deps: EnvdDeps, t: EnvdTarget, path: string): Promise<void> {
  const placeholder = `${path.replace(/\/+$/, '')}/.sbx-mkdir-${randomBytes(6).toString('hex')}`;
  await deps.files.write(t.rec.id, placeholder, new Uint8Array(0), undefined, t.caller);
  await deps.files.remove(t.rec.id, placeholder, false, t.caller);
}

async function exists(deps: EnvdDeps, t: EnvdTarget, path: string): Promise<boolean> {
  try {
    await deps.files.stat(t.rec.id, path, t.caller);
    return true;
  } catch (err) {
    if (isSbxError(err) && err.code === 'not_found') return false;
    throw err;
  }
}

/** The entries under `root` down to `depth` levels, breadth first, at most MAX_LIST_ENTRIES. */
async function listDeep(deps: EnvdDeps, t: EnvdTarget, root: string, depth: number): Promise<Entry[]> {
  const out: Entry[] = [];
  let level = [root];
  for (let d = 1; d <= depth && level.length > 0; d++) {
    const next: string[] = [];
    for (const dir of level) {
      let items: FileInfo[];
      try {
        items = await deps.files.list(t.rec.id, dir, t.caller);
      } catch (err) {
        // A directory that vanished or cannot be read below the root is skipped; the root's failure is the answer.
        if (dir === root || !isSbxError(err)) throw err;
        continue;
      }
      for (const f of items) {
        if (out.length >= MAX_LIST_ENTRIES) return out;
        out.push(entryOf(f));
        if (f.is_dir) next.push(f.path);
      }
    }
    level = next;
  }
  return out;
}

/** sbx's FileInfo as E2B's EntryInfo (owner and group are not known through the file API: empty). */
export function entryOf(f: FileInfo): Entry {
  const bits = Number.parseInt(f.mode, 8) & 0o7777;
  const mtime = Date.parse(f.mod_time);
  return {
    name: f.name,
    type: f.is_dir ? FileType.DIRECTORY : FileType.FILE,
    path: f.path,
    size: BigInt(Math.max(0, Math.trunc(f.size))),
    mode: bits,
    permissions: permissionsOf(f.is_dir, bits),
    owner: '',
    group: '',
    ...(Number.isFinite(mtime) ? { modifiedTime: timestampFromMs(mtime) } : {}),
  };
}

/** `drwxr-xr-x` / `-rw-r--r--`, as `ls -l` and envd show it. */
function permissionsOf(dir: boolean, bits: number): string {
  let s = dir ? 'd' : '-';
  for (const shift of [6, 3, 0]) {
    const b = (bits >> shift) & 7;
    s += `${b & 4 ? 'r' : '-'}${b & 2 ? 'w' : '-'}${b & 1 ? 'x' : '-'}`;
  }
  return s;
}
