import type { HttpDeps } from './deps.js';

/** One connected event-stream client, as the events route tracks it. */
export interface OpenStream {
  close(comment: string): void;
}

const streamsByDeps = new WeakMap<HttpDeps, Set<OpenStream>>();

/** The set of open event streams for one app's deps (the events route adds and removes). */
export function openStreams(deps: HttpDeps): Set<OpenStream> {
  let open = streamsByDeps.get(deps);
  if (!open) {
    open = new Set<OpenStream>();
    streamsByDeps.set(deps, open);
  }
  return open;
}

/** Connected event-stream clients (diagnostics `events.subscribers`; in-process bus listeners do not count). */
export function eventSubscribers(deps: HttpDeps): number {
  return streamsByDeps.get(deps)?.size ?? 0;
}
