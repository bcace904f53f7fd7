/**
 * File watch through sbx-agent (DESIGN §16, docs/agent.md "Watch"): one WATCH stream on the
 * container's agent connection — the agent's inotify inside the sandbox, no engine call per event
 * and no polling. The agent is the sandbox's (it could be stood in for): what it sends is only
 * ever paths for this sandbox's own watch, checked to be absolute, and bounded by core.
 */
import { SbxError } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';
import { AsyncQueue } from '../../../core/async-queue.js';
import { decodeWatchPayload, watchRefusal } from '../shared/host-watch.js';
import { cString, u32 } from './agent.js';
import { type AgentConnection, R, T } from './agent-conn.js';

/** The agent version that knows WATCH. */
const WATCH_VERSION = 2;
/** How long the agent may take to put its watches in place (up to 4,096 directories). */
const READY_TIMEOUT_MS = 15_000;

export async function agentWatch(
  conn: AgentConnection,
  path: string,
  recursive: boolean,
  signal: AbortSignal,
): Promise<AsyncIterable<WatchEvent>> {
  if (conn.hello.version < WATCH_VERSION)
    throw new SbxError('not_implemented', 'this sandbox’s agent predates file watch: watch works in sandboxes spawned since');
  const queue = new AsyncQueue<WatchEvent>();
  let settle: ((err?: unknown) => void) | null = null;
  const ready = new Promise<void>((resolve, reject) => {
    settle = (err) => {
      settle = null;
      if (err) reject(err);
      else resolve();
    };
  });
  let open = true;
  const id = conn.open({
    frame(type, payload) {
      if (type === R.STARTED) return settle?.();
      if (type === R.ERROR) {
        settle?.(watchRefusal(payload.length >= 8 ? payload.readUInt32LE(4) : 0, path));
        return end();
      }
      if (type === R.END) return end();
      if (type !== R.WEVENT) return;
      const f = decodeWatchPayload(payload);
      if (f?.kind !== 'event') return;
      const ev = f.event;
      if (ev.type !== 'overflow' && (!ev.path.startsWith('/') || (ev.old_path !== undefined && !ev.old_path.startsWith('/')))) return;
      queue.push(ev);
    },
    lost() {
      settle?.(new SbxError('provider_error', 'file watch: the sandbox agent went away'));
      end();
    },
  });
  function end() {
    queue.end();
    if (open) {
      open = false;
      conn.release(id);
    }
  }
  const stop = () => {
    if (open) conn.send(id, T.CANCEL);
    end();
  };
  conn.send(id, T.WATCH, u32(recursive ? 1 : 0), cString(path));
  const onAbort = () => stop();
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(
    () => settle?.(new SbxError('timeout', 'file watch: the sandbox agent did not start the watch in time')),
    READY_TIMEOUT_MS,
  );
  try {
    await ready;
  } catch (err) {
    stop();
    signal.removeEventListener('abort', onAbort);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return {
    [Symbol.asyncIterator]() {
      const it = queue[Symbol.asyncIterator]();
      return {
        next: () => it.next(),
        return: async () => {
          stop();
          signal.removeEventListener('abort', onAbort);
          return it.return!();
        },
      };
    },
  };
}
