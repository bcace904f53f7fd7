/** Workers registered with the control plane (a Store role). */

export interface WorkerCapacity {
  max_sandboxes: number;
  max_sandboxes_per_owner: number;
  rpc_url?: string;
  preview_domain?: string;
}

export interface WorkerRecord {
  id: string;
  hostname: string;
  status: string;
  providers: string[];
  capabilities: string[];
  capacity: WorkerCapacity;
  /** Its egress gateway's verdicts so far (DESIGN §10), as its last heartbeat counted them. */
  egress?: EgressCounts;
  last_heartbeat: string;
  created_at: string;
  updated_at: string;
}

/** Egress verdicts counted by a gateway since it was first started (cumulative, kept across restarts). */
export interface EgressCounts {
  allowed: number;
  denied: number;
  /** Requests sent on with a secret's value injected (DESIGN §15); absent from older workers. */
  injections?: number;
}

export interface WorkerStore {
  /** Insert or update; keeps created_at of an existing row. */
  upsertWorker(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): Promise<WorkerRecord>;
  getWorker(id: string): Promise<WorkerRecord | null>;
  /** Sorted by id. */
  listWorkers(): Promise<WorkerRecord[]>;
  deleteWorker(id: string): Promise<boolean>;
}
