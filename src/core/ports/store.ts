/**
 * The Store port: persistence as role interfaces (one file each in this folder), so a service can
 * depend on only the roles it uses; `Store` is their intersection.
 */

import type { SecretStore } from '../secrets/store-port.js';
import type { AuditStore } from './audit-store.js';
import type { IdempotencyStore } from './idempotency-store.js';
import type { LeaseStore } from './lease-store.js';
import type { PoolUidStore } from './pool-store.js';
import type { ProcessStore } from './process-store.js';
import type { QuotaStore } from './quota-store.js';
import type { SharedState } from './replica.js';
import type { SandboxStore } from './sandbox-store.js';
import type { SnapshotStore } from './snapshot-store.js';
import type { TemplateStore } from './template-store.js';
import type { VolumeStore } from './volume-store.js';
import type { WarmStore } from './warm-store.js';
import type { WorkerStore } from './worker-store.js';

/** Opening, migrating and closing a store (Store.driver names the SQL dialect). */
export interface StoreLifecycle {
  readonly driver: string;
  /** State that replicas share (admission slots, event journal); absent on a one-process store. */
  readonly shared?: SharedState;
  /** Applies pending versioned migrations. Idempotent. */
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Round-trips the store; resolves with the latency in ms or rejects. */
  ping(): Promise<number>;
}

export interface MetaStore {
  /** Key/value for installation facts (installation id, schema version). */
  getMeta(key: string): Promise<string | null>;
  setMeta(key: string, value: string): Promise<void>;
  /**
   * Stores `value` under `key` unless a value is already there, atomically, and returns the value
   * that is stored: the first writer wins, so replicas starting at once agree on one value.
   */
  claimMeta(key: string, value: string): Promise<string>;
}

/**
 * Persistence: the intersection of the role interfaces of this folder, so a service can depend on only
 * the roles it uses. SQLite and PostgreSQL implement it once (src/adapters/stores/sql) and pass
 * one contract suite (test/contract/store.contract.ts). Lists are deterministically sorted.
 */
export type Store = StoreLifecycle &
  MetaStore &
  SandboxStore &
  TemplateStore &
  QuotaStore &
  WorkerStore &
  LeaseStore &
  AuditStore &
  IdempotencyStore &
  ProcessStore &
  WarmStore &
  PoolUidStore &
  SnapshotStore &
  VolumeStore &
  SecretStore;
