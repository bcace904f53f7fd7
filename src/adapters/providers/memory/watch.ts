/**
 * Watches of the in-memory provider (DESIGN §16), driven by the tree's own changes (writes through
 * the API and by its shell alike): what a directory watch of the host providers reports, without
 * a kernel. Links are never followed: a change is reported at the path it was made under.
 */
import { AsyncQueue } from '../../../core/async-queue.js';
import { badRequest, notFound } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';
import type { FsChange, MemoryFs } from './fs.js';

export type ChangeListener = (change: FsChange) => void;

/** Whether `p` is under the watched `dir`: a direct entry, or any depth when recursive. */
function inScope(dir: string, p: string, recursive: boolean): boolean {
  const prefix = dir === '/' ? '/' : `${dir}/`;
  if (!p.startsWith(prefix) || p.length === prefix.length) return false;
  return recursive || !p.slice(prefix.length).includes('/');
}

/** A change as the watch of `dir` sees it: a rename across its edge is a create or a remove. */
export function seenFrom(dir: string, recursive: boolean, c: FsChange): WatchEvent | null {
  if (c.type !== 'rename') return inScope(dir, c.path, recursive) ? { type: c.type, path: c.path } : null;
  const to = inScope(dir, c.path, recursive);
  const from = inScope(dir, c.old_path, recursive);
  if (to && from) return { type: 'rename', path: c.path, old_path: c.old_path };
  if (to) return { type: 'create', path: c.path };
  if (from) return { type: 'remove', path: c.old_path };
  return null;
}

/**
 * Starts a watch of `dir` in `fs` (a directory, not through a link): its changes until the signal
 * aborts, the consumer stops or `ended` fires (the runtime was destroyed).
 */
export function memoryWatch(
  fs: MemoryFs,
  listeners: Set<ChangeListener>,
  dir: string,
  recursive: boolean,
  signal: AbortSignal,
): AsyncIterable<WatchEvent> & { end(): void } {
  const node = fs.lookup(dir, false);
  if (node === undefined) throw notFound(`${dir}: no such file or directory`);
  if (node.kind !== 'dir') throw badRequest(`${dir} is not a directory`);
  const queue = new AsyncQueue<WatchEvent>();
  const listener: ChangeListener = (c) => {
    const ev = seenFrom(dir, recursive, c);
    if (ev) queue.push(ev);
  };
  listeners.add(listener);
  const end = () => {
    listeners.delete(listener);
    queue.end();
  };
  if (signal.aborted) end();
  signal.addEventListener('abort', end, { once: true });
  return {
    end,
    [Symbol.asyncIterator]() {
      const it = queue[Symbol.asyncIterator]();
      return {
        next: () => it.next(),
        return: async () => {
          end();
          return it.return!();
        },
      };
    },
  };
}
