import { isSbxError } from '../errors.js';

/** One row of the diagnostics `operations` array: counts and latency of one operation on one provider. */
export interface OperationStat {
  operation: string;
  provider: string;
  count: number;
  success: number;
  failure: number;
  latency_ms: { total: number; min: number; max: number; avg: number };
  /** Error code of the latest failure, if any (never its message: backend text stays inside). */
  last_error_code?: string;
  last_failure_at?: string;
}

/** What a recorder learns about one finished operation. */
export interface OperationSample {
  operation: string;
  provider: string;
  ok: boolean;
  latency_ms: number;
  error_code?: string;
}

export type OperationListener = (sample: OperationSample) => void;

interface Row {
  count: number;
  success: number;
  failure: number;
  total: number;
  min: number;
  max: number;
  lastErrorCode?: string;
  lastFailureAt?: string;
}

/** Codes that say the caller asked for something wrong, not that the provider failed. */
const CLIENT_CODES = new Set(['bad_request', 'not_found', 'conflict', 'payload_too_large', 'forbidden', 'unauthorized', 'resource_limit']);

/** Classifies a thrown error: client mistakes count as a working provider, everything else as a failure. */
export function isProviderFailure(err: unknown): boolean {
  return !(isSbxError(err) && CLIENT_CODES.has(err.code));
}

/**
 * Per (operation, provider) success/failure counts and latency (count/total/min/max/avg), in
 * memory. Listeners see every sample (the Prometheus histograms hang off them).
 */
export class OperationStats {
  private readonly rows = new Map<string, Row>();
  private readonly listeners = new Set<OperationListener>();

  /** `now` is the Clock port's reading (compose passes `() => clock.now()`). */
  constructor(private readonly now: () => Date) {}

  record(sample: OperationSample): void {
    const key = `${sample.operation}\u0000${sample.provider}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { count: 0, success: 0, failure: 0, total: 0, min: Number.POSITIVE_INFINITY, max: 0 };
      this.rows.set(key, row);
    }
    const ms = Math.max(0, sample.latency_ms);
    row.count++;
    row.total += ms;
    row.min = Math.min(row.min, ms);
    row.max = Math.max(row.max, ms);
    if (sample.ok) {
      row.success++;
    } else {
      row.failure++;
      row.lastErrorCode = sample.error_code ?? 'provider_error';
      row.lastFailureAt = this.now().toISOString();
    }
    for (const l of this.listeners) {
      try {
        l(sample);
      } catch {
        // A broken listener must not break the operation being measured.
      }
    }
  }

  onRecord(listener: OperationListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Sorted by operation, then provider. Latencies rounded to 0.001 ms. */
  snapshot(): OperationStat[] {
    const out: OperationStat[] = [];
    for (const [key, r] of this.rows) {
      const [operation = '', provider = ''] = key.split('\u0000');
      const stat: OperationStat = {
        operation,
        provider,
        count: r.count,
        success: r.success,
        failure: r.failure,
        latency_ms: {
          total: round(r.total),
          min: r.count > 0 ? round(r.min) : 0,
          max: round(r.max),
          avg: r.count > 0 ? round(r.total / r.count) : 0,
        },
      };
      if (r.lastErrorCode) stat.last_error_code = r.lastErrorCode;
      if (r.lastFailureAt) stat.last_failure_at = r.lastFailureAt;
      out.push(stat);
    }
    return out.sort((a, b) => (a.operation === b.operation ? cmp(a.provider, b.provider) : cmp(a.operation, b.operation)));
  }
}

const round = (n: number) => Math.round(n * 1000) / 1000;
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Provider methods that act on one running sandbox (files, logs), with the operation name they are reported under. */
export const RUNTIME_OPERATIONS: Readonly<Record<string, string>> = {
  writeFile: 'write_file',
  writeFileStream: 'write_file',
  readFile: 'read_file',
  openFile: 'read_file',
  deleteFile: 'delete_file',
  listFiles: 'list_files',
  moveFile: 'move_file',
  chmod: 'chmod',
  stat: 'stat',
  glob: 'glob',
  logs: 'logs',
};
