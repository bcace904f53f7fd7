/** Sandboxes as stored (a Store role) and the records other ports share: states, volume mounts. */

import type { EgressLists } from '../network/rules.js';

export type SandboxState = 'running' | 'paused' | 'destroyed' | 'unhealthy' | 'expired' | 'error';

/** States whose runtime exists and holds resources (DESIGN.md §16: `paused` is alive and counts). */
export const ALIVE_STATES: readonly SandboxState[] = ['running', 'paused', 'unhealthy', 'error'];

/** A sandbox as stored. Timestamps are ISO 8601 UTC strings. */
export interface SandboxRecord {
  id: string;
  state: SandboxState;
  provider: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  created_at: string;
  updated_at: string;
  expires_at: string;
  metadata: Record<string, string>;
  /** Owner for quotas and ownership checks; null when none was given. */
  owner_id: string | null;
  /** Owning worker (`local` in single-node mode). Internal. */
  worker_id: string;
  /** Provider runtime id (container id, directory, …). Internal. Null until the provider answered. */
  runtime_id: string | null;
  /** Template the sandbox was spawned from, if any. */
  template: string | null;
  /** The network it got (`none`, `bridge`, a docker network, `host`); absent on rows from before networks. */
  network?: string | null;
  /** Volumes it mounts (DESIGN.md §10); absent or empty = none. */
  volumes?: VolumeMount[] | null;
  /** The snapshot it started from, if any. */
  snapshot?: string | null;
  /** The sandbox it was forked from (DESIGN.md §16), if any; shown as `forked_from`. */
  forked_from?: string | null;
  /**
   * The fork image it started from (DESIGN.md §16): a name the provider gave its copy of the
   * parent's filesystem, shared by the forks of one request and removed with the last of them.
   * Internal.
   */
  fork?: string | null;
  /** Egress allow and deny lists of a filtered sandbox (DESIGN.md §10), canonical; absent otherwise. */
  egress?: EgressLists | null;
  /**
   * Environment variables every command in the sandbox gets (DESIGN.md §14: E2B's `envVars`), for
   * the command planes to apply; never shown in an API answer, an event or a log (values may be secrets).
   */
  env?: Record<string, string> | null;
  /**
   * Random seed of the sandbox's envd access token (DESIGN.md §14), hex: the token is derived from it
   * and the installation secret (`core/auth/access-token.ts`), so the row alone does not give it.
   * Absent: no token (its envd plane needs none).
   */
  access_token_seed?: string | null;
  /** Paused after this long without activity (DESIGN.md §16), ms; absent/null: never. */
  auto_pause_ms?: number | null;
  /** What the TTL does (DESIGN.md §16): `pause` pauses at `pause_at`; absent/null: destroy at `expires_at`. */
  on_expire?: 'destroy' | 'pause' | null;
  /** With `on_expire: pause`, when the TTL ends and the sandbox is paused; `expires_at` is then `pause_at` + `defaults.paused_ttl`. */
  pause_at?: string | null;
  /** With `on_expire: pause`, the TTL a resume gives afresh (ms). */
  ttl_ms?: number | null;
}

/** A volume mounted into a sandbox: its name and the absolute, normalized path it appears at. */
export interface VolumeMount {
  name: string;
  mount_path: string;
}

export interface SandboxFilter {
  states?: SandboxState[];
  owner_id?: string;
  worker_id?: string;
  /** Ids starting with this string (matched literally: `%` and `_` are no wildcards). */
  id_prefix?: string;
  /** Only sandboxes whose `expires_at` is after this ISO timestamp. */
  expires_after?: string;
  /** Only sandboxes whose `expires_at` is at or before this ISO timestamp (past their TTL). */
  expires_by?: string;
  /** Only sandboxes whose `pause_at` is set and at or before this ISO timestamp (`on_expire: pause`, DESIGN.md §16). */
  pause_due_by?: string;
  /**
   * Ownership applied in the query: rows without a private owner (none, or a derived `key/…`,
   * `ip/…` owner) plus, when `owner_id` is a string, that owner's rows.
   */
  visible_to?: { owner_id: string | null };
  /** Keyset paging: only rows after this position in (created_at, id) order; the row itself may be gone. */
  after?: { created_at: string; id: string };
  /** At most this many rows (after filtering and sorting). */
  limit?: number;
}

/** Live counts (DESIGN.md §13): what admission reads instead of listing sandboxes. */
export interface LiveCounts {
  /** Live sandboxes (running, paused or unhealthy, expiry after `now`). */
  total: number;
  /** The earliest expiry among them: when capacity opens by itself. */
  next_expiry: string | null;
  /** Live sandboxes of each owner asked for (absent = 0). */
  by_owner: Record<string, number>;
}

export interface SandboxTally {
  state: SandboxState;
  provider: string;
  worker_id: string;
  /** `expires_at` at or before the time asked. */
  past_ttl: boolean;
  n: number;
}

export interface SandboxStore {
  insertSandbox(rec: SandboxRecord): Promise<void>;
  /** Index-only counts of live sandboxes at `now`, in total and for `owners`. */
  countLive(now: string, owners: readonly string[]): Promise<LiveCounts>;
  /** Every row counted by state, provider, worker and whether it is past its TTL at `now` (metrics). */
  tallySandboxes(now: string): Promise<SandboxTally[]>;
  /** Live sandboxes per worker, and per worker for `owner` (null = none asked). */
  countLiveByWorker(
    now: string,
    owner: string | null,
  ): Promise<{ by_worker: Record<string, number>; by_worker_for_owner: Record<string, number> }>;
  /** Sandboxes of `provider` a list shows at `now` (running, unhealthy, error; expiry after `now`), counted by index. */
  countOfProvider(now: string, provider: string): Promise<number>;
  /** Applies the patch and returns the new record, or null if the id is unknown. */
  updateSandbox(id: string, patch: Partial<Omit<SandboxRecord, 'id'>>): Promise<SandboxRecord | null>;
  getSandbox(id: string): Promise<SandboxRecord | null>;
  /** Sorted by created_at, then id. */
  listSandboxes(filter?: SandboxFilter): Promise<SandboxRecord[]>;
  /** Every sandbox started from fork image `fork` (any state; at most the forks of one request), oldest first. */
  sandboxesOfFork(fork: string): Promise<SandboxRecord[]>;
}
