/**
 * Calls that change a remote sandbox, with its lease (DESIGN.md §7 "Fencing"). The lease is read
 * from the store at call time; when the worker refuses it (403) because it has already seen a newer
 * generation and the store now holds a newer one too — a renewal of this same control plane (an
 * extend, a renewal before a long call) raced the call — the call goes once more with that lease.
 * A refusal the store cannot answer with a newer lease is a real stale owner: it stands.
 */
import type { RpcLease } from '../../../contracts/worker-rpc.js';
import { isSbxError, SbxError } from '../../../core/errors.js';
import type { ExecEvent, WorkerRecord } from '../../../core/ports/index.js';
import type { RemoteTarget } from '../../../core/scheduler/remote-port.js';
import type { RpcClient } from './rpc-client.js';

export interface FencedCalls {
  /** One call with the lease (`required`: none in the store → 409, else sent without one). */
  call<T>(method: string, params: Record<string, unknown>, signal: AbortSignal | undefined, required: boolean): Promise<T>;
  /** A command's events; a refusal before its first event is retried like a call. */
  exec(run: (lease: RpcLease | null) => AsyncGenerator<ExecEvent>): AsyncGenerator<ExecEvent>;
}

export function fencedCalls(rpc: RpcClient, w: WorkerRecord, target: RemoteTarget): FencedCalls {
  const read = async (required: boolean): Promise<RpcLease | null> => {
    const l = await target.lease();
    if (!l && required) throw new SbxError('conflict', `sandbox ${target.sandbox_id} holds no lease`);
    return l;
  };
  /** The store's lease when it is newer than the refused one, else null (the refusal stands). */
  const newer = async (err: unknown, sent: RpcLease | null): Promise<RpcLease | null> => {
    if (!sent || !isSbxError(err) || err.code !== 'forbidden') return null;
    const fresh = await target.lease().catch(() => null);
    return fresh && fresh.generation > sent.generation ? fresh : null;
  };
  return {
    async call<T>(method: string, params: Record<string, unknown>, signal: AbortSignal | undefined, required: boolean): Promise<T> {
      const lease = await read(required);
      try {
        return await rpc.call<T>(w, method, params, { signal, lease });
      } catch (err) {
        const fresh = await newer(err, lease);
        if (!fresh) throw err;
        return rpc.call<T>(w, method, params, { signal, lease: fresh });
      }
    },
    async *exec(run: (lease: RpcLease | null) => AsyncGenerator<ExecEvent>): AsyncGenerator<ExecEvent> {
      let lease = await read(false);
      for (let retried = false; ; retried = true) {
        let started = false;
        try {
          for await (const ev of run(lease)) {
            started = true;
            yield ev;
          }
          return;
        } catch (err) {
          // A refusal comes before the command starts (nothing read from stdin yet): safe to send again.
          const fresh = started || retried ? null : await newer(err, lease);
          if (!fresh) throw err;
          lease = fresh;
        }
      }
    },
  };
}
