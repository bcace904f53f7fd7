/**
 * The egress gateway's verdicts as the control plane keeps them (DESIGN.md §10): each one counts
 * (`sbx_egress_connections_total`), each denial is a `network.denied` event, visible as its
 * sandbox is (owner and worker from the sandbox's record).
 */
import type { SandboxStore } from '../ports/index.js';
import type { EventBus } from './bus.js';

/** One verdict of a gateway (this node's, or a worker's sent in a batch). */
export interface EgressVerdict {
  sandbox_id: string | null;
  host: string;
  port: number;
  verdict: 'allowed' | 'denied';
  reason?: string;
}

export interface EgressStats {
  allowed: number;
  denied: number;
  injections: number;
}

export function egressVerdicts(
  store: Pick<SandboxStore, 'getSandbox'>,
  bus: EventBus,
): { stats: EgressStats; onVerdict(v: EgressVerdict): void } {
  const stats: EgressStats = { allowed: 0, denied: 0, injections: 0 };
  const onVerdict = (v: EgressVerdict) => {
    if (v.verdict === 'allowed') return void stats.allowed++;
    stats.denied++;
    const id = v.sandbox_id;
    if (!id) return;
    void store
      .getSandbox(id)
      .then((rec) => {
        bus.publish({
          type: 'network.denied',
          sandbox_id: id,
          ...(rec?.owner_id ? { owner_id: rec.owner_id } : {}),
          ...(rec ? { worker_id: rec.worker_id } : {}),
          data: { sandbox_id: id, host: v.host, port: v.port, reason: v.reason },
        });
      })
      .catch(() => undefined);
  };
  return { stats, onVerdict };
}
