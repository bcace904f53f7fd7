/** Named volumes (a Store role). */

/** A named volume (DESIGN.md §10): data that outlives sandboxes, kept until deleted. */
export interface VolumeRecord {
  name: string;
  provider: string;
  created_at: string;
  owner_id: string | null;
  /** The worker whose provider holds it (DESIGN.md §10); absent or null: this node's own. */
  worker_id?: string | null;
}

export interface VolumeStore {
  /** Throws SbxError `conflict` when the name exists. */
  insertVolume(rec: VolumeRecord): Promise<void>;
  getVolume(name: string): Promise<VolumeRecord | null>;
  /** Sorted by name. */
  listVolumes(): Promise<VolumeRecord[]>;
  deleteVolume(name: string): Promise<boolean>;
  /** Ids of sandboxes not yet destroyed that mount the volume, sorted. */
  sandboxesMounting(name: string): Promise<string[]>;
}
