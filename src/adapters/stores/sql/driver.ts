import type { LeaseRecord, LeaseResult } from '../../../core/ports/index.js';
import type { Row } from '../shared/records.js';

/**
 * What one SQL dialect supplies to the shared SqlStore: statement execution with `?`
 * placeholders (the driver rewrites them if its dialect numbers them), error mapping, schema
 * migration, and the two lease steps whose atomicity is dialect-specific (spec 3.3).
 */
export interface SqlDriver {
  /** Reported as Store.driver. */
  readonly name: string;
  /** Rows of one statement; driver errors leave as SbxError. Rejects once closed. */
  rows(sql: string, params?: unknown[]): Promise<Row[]>;
  /** Rows changed by one statement. */
  count(sql: string, params?: unknown[]): Promise<number>;
  /** Applies the dialect's migrations and records schema_version. */
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Atomic acquire: null when another holder owns an unexpired lease. */
  acquireLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseRecord | null>;
  /** Atomic renew: only the current holder, only before expiry. */
  renewLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseResult>;
}
