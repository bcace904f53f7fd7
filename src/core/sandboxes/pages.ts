import type { SandboxFilter, SandboxRecord, SandboxStore } from '../ports/index.js';

/** Rows per page when a background pass walks sandboxes (DESIGN.md §13). */
export const PAGE_ROWS = 500;

/**
 * Every row matching `filter`, read in keyset pages: a pass over any number of sandboxes holds one
 * page at a time, and rows changed as it goes (destroyed, marked) do not shift the walk.
 */
export async function* sandboxPages(
  store: Pick<SandboxStore, 'listSandboxes'>,
  filter: Omit<SandboxFilter, 'limit' | 'after'>,
  size = PAGE_ROWS,
): AsyncGenerator<SandboxRecord> {
  let after: SandboxFilter['after'];
  for (;;) {
    const rows = await store.listSandboxes({ ...filter, limit: size, ...(after ? { after } : {}) });
    yield* rows;
    if (rows.length < size) return;
    const last = rows[rows.length - 1]!;
    after = { created_at: last.created_at, id: last.id };
  }
}
