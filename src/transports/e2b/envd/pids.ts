import { createHash } from 'node:crypto';
import { notFound } from '../../../core/errors.js';
import type { ProcessRecord } from '../../../core/ports/index.js';
import type { ProcessService } from '../../../core/sandboxes/processes.js';
import type { EnvdTarget } from './target.js';

/**
 * E2B's pid of an sbx process (DESIGN.md §14): a uint32 derived from sbx's process id (the first
 * 31 bits of its SHA-256, never 0), so it is the same on every replica and stable for the
 * sandbox's life without a stored column.
 */
export function pidOf(processId: string): number {
  const n = createHash('sha256').update(processId).digest().readUInt32BE(0) & 0x7fffffff;
  return n === 0 ? 1 : n;
}

/** The process of the target sandbox whose pid is `pid` (a running one first); not_found otherwise. */
export async function processByPid(processes: ProcessService, t: EnvdTarget, pid: number): Promise<ProcessRecord> {
  const all = await processes.list(t.rec.id, t.caller);
  const matches = all.filter((p) => pidOf(p.id) === pid);
  const rec = matches.find((p) => p.state === 'running') ?? matches.at(-1);
  if (!rec) throw notFound(`process with pid ${pid} not found`);
  return rec;
}
