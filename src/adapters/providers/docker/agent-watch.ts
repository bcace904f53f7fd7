/**
 * File watch through sbx-agent (DESIGN §16, docs/agent.md "Watch"): one WATCH stream on the
 * container's agent connection — the agent's inotify inside the sandbox, no engine call per event
 * and no polling. The agent is the sandbox's (it could be stood in for): what it sends is only
 * ever paths for this sandbox's own watch, checked to be absolute (shared/watch-decoder.ts), and bounded by core.
 */
import { SbxError } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';
import { WatchStream } from '../shared/watch-decoder.js';
import { cString, u32 } from './agent.js';
import { type AgentConnection, R, T } from './agent-conn.js';

/** The agent version that knows WATCH. */
const WATCH_VERSION = 2;

export async function agentWatch(
  conn: AgentConnection,
  path: string,
  recursive: boolean,
  signal: AbortSignal,
): Promise<AsyncIterable<WatchEvent>> {
  if (conn.hello.version < WATCH_VERSION)
    throw new SbxError('not_implemented', 'this sandbox’s agent predates file watch: watch works in sandboxes spawned since');
  let open = true;
  const release = () => {
    if (!open) return;
    open = false;
    conn.release(id);
  };
  const watch = new WatchStream(path, () => {
    if (open) conn.send(id, T.CANCEL);
    release();
  });
  const id = conn.open({
    frame(type, payload) {
      if (type === R.STARTED) return watch.started();
      if (type === R.WEVENT) return watch.payload(payload);
      if (type === R.ERROR) watch.refuse(payload.length >= 8 ? payload.readUInt32LE(4) : 0);
      if (type === R.ERROR || type === R.END) {
        watch.end();
        release();
      }
    },
    lost() {
      watch.fail(new SbxError('provider_error', 'file watch: the sandbox agent went away'));
      release();
    },
  });
  conn.send(id, T.WATCH, u32(recursive ? 1 : 0), cString(path));
  return watch.opened(signal, 'file watch: the sandbox agent did not start the watch in time');
}
