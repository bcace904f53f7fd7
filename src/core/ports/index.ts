/**
 * Ports: the interfaces core drives, one file per port (DESIGN.md §2). Adapters (stores, providers)
 * implement them; compose wires them. Every method is asynchronous; provider methods take an
 * AbortSignal so a cancelled request, a deadline and a remote worker look the same to core.
 * This index is the one import site for callers; the files import each other directly.
 */

export * from './clock.js';
export * from './sandbox-store.js';
export * from './template-store.js';
export * from './quota-store.js';
export * from './worker-store.js';
export * from './lease-store.js';
export * from './audit-store.js';
export * from './idempotency-store.js';
export * from './snapshot-store.js';
export * from './volume-store.js';
export * from './process-store.js';
export * from './warm-store.js';
export * from './pool-store.js';
export * from './store.js';
export * from './provider.js';
export * from './replica.js';
export * from '../secrets/store-port.js';
