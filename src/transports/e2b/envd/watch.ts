import { randomUUID } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { SbxError } from '../../../core/errors.js';
import type { EnvdDeps, EnvdWatch, WatchEvent } from './deps.js';
import { toConnectError } from './errors.js';
import { EventType, type Filesystem, type FilesystemEventSchema } from './gen/filesystem/filesystem_pb.js';
import { keepaliveMs, withKeepalive } from './keepalive.js';
import type { EnvdTarget } from './target.js';

type Resolve = (ctx: HandlerContext) => Promise<EnvdTarget>;
type PathOf = (t: EnvdTarget, ctx: HandlerContext, path: string) => Promise<string>;
type FsEvent = MessageInitShape<typeof FilesystemEventSchema>;

/** Events a polled watcher keeps until read (older ones dropped). */
const WATCHER_BUFFER = 10_000;
/** Polled watchers per sandbox on this control plane. */
const WATCHERS_PER_SANDBOX = 8;
/** A polled watcher nobody read for this long is removed. */
const WATCHER_IDLE_MS = 10 * 60_000;

const TYPES: Record<Exclude<WatchEvent['type'], 'overflow'>, EventType> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  rename: EventType.RENAME,
  chmod: EventType.CHMOD,
};

interface Watcher {
  sandboxId: string;
  events: FsEvent[];
  ac: AbortController;
  readAt: number;
}

/**
 * E2B's watch methods over sbx's file watch (DESIGN.md §16): `WatchDir` streams, and the polled
 * trio (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`) keeps a bounded buffer per watcher.
 * Without a wired watch every one answers `unimplemented`. Event names are relative to the
 * watched directory, as envd gives them.
 */
export function watchService(
  deps: EnvdDeps,
  resolve: Resolve,
  pathOf: PathOf,
): Pick<ServiceImpl<typeof Filesystem>, 'watchDir' | 'createWatcher' | 'getWatcherEvents' | 'removeWatcher'> {
  const watchers = new Map<string, Watcher>();
  const need = (): EnvdWatch => {
    if (!deps.watch) throw new SbxError('not_implemented', 'file watch is not available on this server yet');
    return deps.watch;
  };
  const begin = async (ctx: HandlerContext, path: string, recursive: boolean, signal: AbortSignal) => {
    // Authorized first: a caller without the token learns nothing, not even what is wired.
    const t = await resolve(ctx);
    const watch = need();
    const root = await pathOf(t, ctx, path);
    return { root, events: await watch.watchFiles(t.caller, t.rec.id, root, { recursive }, signal), t };
  };
  return {
    async *watchDir(req, ctx) {
      let w: Awaited<ReturnType<typeof begin>>;
      try {
        w = await begin(ctx, req.path, req.recursive, ctx.signal);
      } catch (err) {
        throw toConnectError(err);
      }
      yield { event: { case: 'start', value: {} } };
      const ms = keepaliveMs(ctx.requestHeader.get('keepalive-ping-interval'));
      for await (const e of withKeepalive<WatchEvent | null>(w.events, ms, () => null, ctx.signal)) {
        if (e === null) yield { event: { case: 'keepalive', value: {} } };
        else if (e.type === 'overflow') throw toConnectError(new SbxError('resource_limit', 'the watch fell behind and ended (overflow)'));
        else yield { event: { case: 'filesystem', value: eventOf(w.root, e) } };
      }
    },
    async createWatcher(req, ctx) {
      try {
        const ac = new AbortController();
        const w = await begin(ctx, req.path, req.recursive, ac.signal);
        if ([...watchers.values()].filter((x) => x.sandboxId === w.t.rec.id).length >= WATCHERS_PER_SANDBOX) {
          ac.abort();
          throw new SbxError('resource_limit', `at most ${WATCHERS_PER_SANDBOX} watchers per sandbox`);
        }
        const id = randomUUID();
        const watcher: Watcher = { sandboxId: w.t.rec.id, events: [], ac, readAt: Date.now() };
        watchers.set(id, watcher);
        void (async () => {
          try {
            for await (const e of w.events) {
              if (Date.now() - watcher.readAt > WATCHER_IDLE_MS) break;
              if (e.type === 'overflow') break;
              watcher.events.push(eventOf(w.root, e));
              if (watcher.events.length > WATCHER_BUFFER) watcher.events.shift();
            }
          } catch {
            // The watch ended (sandbox gone, cancelled): the watcher answers not_found from now on.
          }
          watchers.delete(id);
          ac.abort();
        })();
        return { watcherId: id };
      } catch (err) {
        throw toConnectError(err);
      }
    },
    async getWatcherEvents(req, ctx) {
      try {
        const w = await owned(watchers, resolve, ctx, req.watcherId);
        w.readAt = Date.now();
        return { events: w.events.splice(0, w.events.length) };
      } catch (err) {
        throw toConnectError(err);
      }
    },
    async removeWatcher(req, ctx) {
      try {
        const w = await owned(watchers, resolve, ctx, req.watcherId);
        w.ac.abort();
        watchers.delete(req.watcherId);
        return {};
      } catch (err) {
        throw toConnectError(err);
      }
    },
  };
}

async function owned(watchers: Map<string, Watcher>, resolve: Resolve, ctx: HandlerContext, id: string): Promise<Watcher> {
  const t = await resolve(ctx);
  const w = watchers.get(id);
  if (!w || w.sandboxId !== t.rec.id) throw new SbxError('not_found', `watcher ${id.slice(0, 64)} not found`);
  return w;
}

function eventOf(root: string, e: WatchEvent): FsEvent {
  const base = root.endsWith('/') ? root : `${root}/`;
  const path = 'path' in e ? e.path : '';
  const name = path.startsWith(base) ? path.slice(base.length) : path;
  return { name, type: TYPES[e.type as keyof typeof TYPES] ?? EventType.UNSPECIFIED };
}
