/**
 * Row <-> record mapping and lease rules shared by the SQLite and PostgreSQL adapters, so both
 * return byte-identical records: timestamps and JSON are stored as text and come back exactly
 * as inserted; numbers are normalized with Number() (pg returns BIGINT as a string).
 */
export * from './records/values.js';
export * from './records/sandbox.js';
export * from './records/template.js';
export * from './records/catalog.js';
export * from './records/quota.js';
export * from './records/worker.js';
export * from './records/lease.js';
export * from './records/audit.js';
