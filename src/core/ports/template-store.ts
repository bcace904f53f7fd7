/** Templates (a Store role). */

import type { EgressLists } from '../network/rules.js';
import type { VolumeMount } from './sandbox-store.js';

export interface TemplateRecord {
  name: string;
  image: string | null;
  memory_mb: number | null;
  vcpus: number | null;
  /** Duration string as given (validated), or null. */
  ttl: string | null;
  provider: string | null;
  metadata: Record<string, string>;
  /** `none`, `bridge` or null (the server default). */
  network?: string | null;
  /** Snapshot its spawns start from, or null. */
  snapshot?: string | null;
  /** Volumes its spawns mount, or null/empty. */
  volumes?: VolumeMount[] | null;
  /** Warm runtimes kept ready for this template's shape (DESIGN.md §11); null/absent: none. */
  warm?: number | null;
  /** Egress lists of its spawns (network `filtered`), canonical; null/absent: none. */
  egress?: EgressLists | null;
  /** Secrets its spawns bind (DESIGN.md §15), resolved in the spawner's namespace; null/absent: none. */
  secrets?: string[] | null;
  /** `auto_pause` of its spawns (duration string, DESIGN.md §16); null/absent: the server default. */
  auto_pause?: string | null;
  /** `on_expire` of its spawns; null/absent: destroy. */
  on_expire?: 'destroy' | 'pause' | null;
  created_at: string;
  updated_at: string;
}

export interface TemplateStore {
  /** Throws SbxError `conflict` when the name exists. */
  createTemplate(rec: TemplateRecord): Promise<void>;
  getTemplate(name: string): Promise<TemplateRecord | null>;
  /** Sorted by name. */
  listTemplates(): Promise<TemplateRecord[]>;
  /** Replaces every field but name and created_at; null if unknown. */
  updateTemplate(name: string, rec: Omit<TemplateRecord, 'name' | 'created_at'>): Promise<TemplateRecord | null>;
  deleteTemplate(name: string): Promise<boolean>;
}
