import { notFound } from '../errors.js';
import type { Clock, Store, WorkerCapacity, WorkerRecord } from '../ports.js';

export const STALE_AFTER_MS = 2 * 60_000;

export interface HeartbeatInput {
  hostname: string;
  status?: string;
  providers?: string[];
  capabilities?: string[];
  capacity?: Partial<WorkerCapacity>;
}

/** The worker registry (spec 2.9, 4.6). In single-node mode this process is the worker `local`. */
export class WorkerService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async heartbeat(id: string, input: HeartbeatInput): Promise<WorkerRecord> {
    const now = this.clock.now().toISOString();
    const prev = await this.store.getWorker(id);
    const capacity: WorkerCapacity = {
      max_sandboxes: input.capacity?.max_sandboxes ?? prev?.capacity.max_sandboxes ?? 0,
      max_sandboxes_per_owner: input.capacity?.max_sandboxes_per_owner ?? prev?.capacity.max_sandboxes_per_owner ?? 0,
    };
    const rpcUrl = input.capacity?.rpc_url ?? prev?.capacity.rpc_url;
    const preview = input.capacity?.preview_domain ?? prev?.capacity.preview_domain;
    if (rpcUrl) capacity.rpc_url = rpcUrl;
    if (preview) capacity.preview_domain = preview;
    return this.store.upsertWorker({
      id,
      hostname: input.hostname,
      status: input.status ?? prev?.status ?? 'online',
      providers: input.providers ?? prev?.providers ?? [],
      capabilities: input.capabilities ?? prev?.capabilities ?? [],
      capacity,
      last_heartbeat: now,
      updated_at: now,
    });
  }

  list(): Promise<WorkerRecord[]> {
    return this.store.listWorkers();
  }

  async get(id: string): Promise<WorkerRecord> {
    const w = await this.store.getWorker(id);
    if (!w) throw notFound(`worker ${id} not found`);
    return w;
  }

  async remove(id: string): Promise<void> {
    if (!(await this.store.deleteWorker(id))) throw notFound(`worker ${id} not found`);
  }

  isStale(w: WorkerRecord): boolean {
    return this.clock.now().getTime() - Date.parse(w.last_heartbeat) > STALE_AFTER_MS;
  }
}
