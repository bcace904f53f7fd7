/** Snapshots (a Store role). */

/** A snapshot of a sandbox's filesystem (DESIGN.md §10): kept until deleted. */
export interface SnapshotRecord {
  name: string;
  provider: string;
  /** The provider's reference to it (docker: `sbx-snapshot/<name>:latest`). */
  image: string;
  /** A microVM kernel; null for container and directory snapshots. */
  kernel: string | null;
  size_bytes: number;
  created_at: string;
  /** Owner of the sandbox it was taken from (null: none). */
  owner_id: string | null;
  sandbox_id: string;
  /** Worker whose provider holds it (`local` in single-node mode). */
  worker_id: string;
}

export interface SnapshotStore {
  /** Throws SbxError `conflict` when the name exists. */
  insertSnapshot(rec: SnapshotRecord): Promise<void>;
  getSnapshot(name: string): Promise<SnapshotRecord | null>;
  /** Sorted by name. */
  listSnapshots(): Promise<SnapshotRecord[]>;
  deleteSnapshot(name: string): Promise<boolean>;
}
