import type { AuditRecord, SandboxRecord, Store, TemplateRecord } from '../../src/core/ports/index.js';

/** What a store factory hands the contract: a fresh, empty location. */
export interface StoreHarness {
  /** A store on a fresh location; the contract migrates it. */
  store: Store;
  /** Opens another store on the same location (after `store.close()`), for persistence checks. */
  reopen(): Promise<Store>;
  /** Closes every store opened here and removes the location. */
  cleanup(): Promise<void>;
}

export type StoreFactory = () => Promise<StoreHarness>;

/** Filled by the contract's beforeEach. */
export interface ContractContext {
  harness: StoreHarness;
  store: Store;
}

/** Fixed base instant; tests advance time by hand, never by waiting. */
export const T0 = Date.parse('2025-01-01T00:00:00.000Z');
export const at = (offsetMs: number): string => new Date(T0 + offsetMs).toISOString();
export const when = (offsetMs: number): Date => new Date(T0 + offsetMs);

export function sandbox(id: string, overrides: Partial<SandboxRecord> = {}): SandboxRecord {
  return {
    id,
    state: 'running',
    provider: 'mock',
    image: 'sbx-test/busybox:latest',
    memory_mb: 512,
    vcpus: 1,
    created_at: at(0),
    updated_at: at(0),
    expires_at: at(30 * 60_000),
    metadata: {},
    owner_id: null,
    worker_id: 'local',
    runtime_id: null,
    template: null,
    ...overrides,
  };
}

export function template(name: string, overrides: Partial<TemplateRecord> = {}): TemplateRecord {
  return {
    name,
    image: null,
    memory_mb: null,
    vcpus: null,
    ttl: null,
    provider: null,
    metadata: {},
    created_at: at(0),
    updated_at: at(0),
    ...overrides,
  };
}

export function audit(id: string, overrides: Partial<AuditRecord> = {}): AuditRecord {
  return {
    id,
    created_at: at(0),
    actor: 'admin',
    method: 'GET',
    path: '/api/v1/admin/audit',
    status: 200,
    duration_ms: 1,
    request_id: `req-${id}`,
    remote_addr: '127.0.0.1',
    user_agent: 'sbx-test',
    ...overrides,
  };
}

export const ids = (rows: Array<{ id: string }>): string[] => rows.map((r) => r.id);
