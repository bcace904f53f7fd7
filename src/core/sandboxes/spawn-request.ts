/** A spawn as asked (`SpawnInput`) and with every default applied (`ResolvedSpawn`): what resolve-spawn.ts makes and spawn.ts runs. */
import type { EgressLists } from '../network/rules.js';
import type { SandboxRecord, VolumeMount } from '../ports/index.js';
import type { PlannedBinding } from '../secrets/service.js';
import type { Lifecycle } from './lifecycle.js';

export interface SpawnInput {
  image?: string;
  provider?: string;
  memory_mb?: number;
  vcpus?: number;
  ttl?: string;
  metadata?: Record<string, string>;
  owner_id?: string | null;
  template?: string | null;
  network?: string;
  /** Egress allow and deny lists (DESIGN.md §10): given without `network`, it means `filtered`. */
  egress?: unknown;
  /** Start from this snapshot (DESIGN.md §10): it fixes provider and image. */
  snapshot?: string;
  volumes?: ReadonlyArray<{ name: string; mount_path: string }>;
  /** Environment of every command (DESIGN.md §14); names are checked. */
  env?: Record<string, string>;
  /** Seed of the envd access token (DESIGN.md §14), hex; made by the caller that hands the token out. */
  access_token_seed?: string;
  /** Secrets to bind (DESIGN.md §15): names in the owner's namespace; needs network `filtered`. */
  secrets?: unknown;
  /** Pause after this long without activity (DESIGN.md §16); `0s` = never; absent: `defaults.auto_pause`. */
  auto_pause?: string;
  /** What the TTL does (DESIGN.md §16): `destroy` (default) or `pause`. */
  on_expire?: 'destroy' | 'pause';
}

/** A spawn request with every default applied. */
export interface ResolvedSpawn {
  image: string;
  provider: string;
  memory_mb: number;
  vcpus: number;
  ttl_ms: number;
  metadata: Record<string, string>;
  owner_id: string | null;
  template: string | null;
  /** `none`, `bridge` or `filtered`; null: the provider's default. */
  network: 'none' | 'bridge' | 'filtered' | null;
  /** The canonical egress lists of a `filtered` spawn; null for every other network. */
  egress: EgressLists | null;
  /** The snapshot it starts from (`image` is then the snapshot's), or null. */
  snapshot: string | null;
  /** Checked volumes to mount; empty for none. */
  volumes: VolumeMount[];
  /** The worker that must run it (where its snapshot or volumes are kept); null: placement chooses. */
  worker: string | null;
  /** Checked environment of every command; empty for none. */
  env: Record<string, string>;
  /** Seed of the envd access token, or null for none. */
  access_token_seed: string | null;
  /** Auto-pause and what the TTL does (DESIGN.md §16). */
  lifecycle: Lifecycle;
  /** Secrets bound (DESIGN.md §15), each with its placeholder (also in `env`); empty for none. */
  secrets: PlannedBinding[];
  /** A fork (DESIGN.md §16): the parent and the fork image it starts from; absent for every other spawn. */
  fork?: ForkOrigin;
}

/** Where a fork starts from: its parent sandbox and the fork image the parent's provider made. */
export interface ForkOrigin {
  parent: SandboxRecord;
  /** The fork image's name (`SpawnSpec.fork`) and the provider's reference to it (`SpawnSpec.image`). */
  name: string;
  image: string;
}
