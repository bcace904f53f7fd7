/**
 * A remote sandbox's file watch (DESIGN §7, §16): `worker.file_watch` as NDJSON envelopes, one
 * change each, parsed line by line as they arrive. Resolves once the worker's watch is in place
 * (its headers came); a garbage line ends it as an invalid answer, a dropped link just ends it;
 * aborting the signal closes the call, which ends the watch on the worker.
 */
import { WATCH_EVENT_TYPES, type WatchEvent, type WorkerRecord } from '../../../core/ports/index.js';
import { errorFrom, type RpcClient } from './rpc-client.js';
import type { ExecTarget } from './remote-exec.js';

/** Longest NDJSON line accepted from a worker (two paths of at most 4 KiB, escaped). */
const MAX_LINE = 64 * 1024;

export async function watchStream(
  rpc: RpcClient,
  w: WorkerRecord,
  t: ExecTarget,
  path: string,
  recursive: boolean,
  signal: AbortSignal,
): Promise<AsyncIterable<WatchEvent>> {
  const { id, body } = await rpc.stream(w, { ...t, path, recursive }, signal, null, 'worker.file_watch');
  async function* events(): AsyncGenerator<WatchEvent> {
    let buf = '';
    try {
      for await (const chunk of body) {
        buf += (chunk as Buffer).toString('utf8');
        if (buf.length > MAX_LINE) throw rpc.invalid(w);
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line === '') continue;
          const ev = parseLine(rpc, w, id, line);
          yield ev;
          if (ev.type === 'overflow') return;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    } finally {
      body.destroy();
    }
  }
  return events();
}

function parseLine(rpc: RpcClient, w: WorkerRecord, id: string, line: string): WatchEvent {
  let env: { id?: unknown; result?: { type?: unknown; path?: unknown; old_path?: unknown }; error?: { code?: unknown; message?: unknown } };
  try {
    env = JSON.parse(line) as typeof env;
  } catch {
    throw rpc.invalid(w);
  }
  if (!env || typeof env !== 'object' || env.id !== id) throw rpc.invalid(w);
  if (env.error) throw errorFrom(w, env.error);
  const r = env.result;
  if (r?.type === 'overflow') return { type: 'overflow' };
  const type = WATCH_EVENT_TYPES.find((k) => k === r?.type);
  if (!type || typeof r?.path !== 'string' || !r.path.startsWith('/')) throw rpc.invalid(w);
  if (type !== 'rename') return { type, path: r.path };
  if (typeof r.old_path !== 'string' || !r.old_path.startsWith('/')) throw rpc.invalid(w);
  return { type, path: r.path, old_path: r.old_path };
}
