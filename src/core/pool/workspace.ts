import { SbxError } from '../errors.js';
import type { WatchEvent, WorkspaceSpec } from '../ports/index.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** `/workspace/<name>` inside the shared runtime (DESIGN.md §8); the name must be a plain one. */
export function workspacePath(ws: WorkspaceSpec): string {
  if (!NAME.test(ws.name) || ws.name.includes('..'))
    throw new SbxError('bad_request', `workspace name ${JSON.stringify(ws.name)} is not a plain name`);
  return `/workspace/${ws.name}`;
}

/**
 * A runtime watch's events as the tenant of workspace `root` (`/workspace/<name>`) sees them: its
 * own paths; anything outside the workspace dropped, a rename in from outside a creation.
 */
export async function* tenantEvents(events: AsyncIterable<WatchEvent>, root: string): AsyncGenerator<WatchEvent> {
  const inside = (q: string): string | null => (q.startsWith(`${root}/`) ? q.slice(root.length) : null);
  for await (const ev of events) {
    if (ev.type === 'overflow') {
      yield ev;
      return;
    }
    const to = inside(ev.path);
    if (to === null) continue;
    if (ev.old_path === undefined) {
      yield { ...ev, path: to };
      continue;
    }
    const from = inside(ev.old_path);
    yield from === null ? { type: 'create', path: to } : { ...ev, path: to, old_path: from };
  }
}
