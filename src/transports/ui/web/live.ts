/** The live event feed (the typed client's event stream) and the per-view cleanup list. */
import type { SbxEvent } from '../../../client/browser.js';
import { api, errText, isUnauthorized } from './api.js';
import { say } from './dom.js';

export const events: SbxEvent[] = [];
const listeners = new Set<(e: SbxEvent) => void>();
let viewCleanup: Array<() => void> = [];
let eventAbort: AbortController | null = null;

/** Runs `fn` when the current view goes away. */
export function onLeave(fn: () => void): void {
  viewCleanup.push(fn);
}

/** Ends the current view: its listeners, streams and sockets. */
export function leaveView(): void {
  for (const c of viewCleanup) c();
  viewCleanup = [];
}

/** Calls `l` for every event while the current view is shown. */
export function onEvent(l: (e: SbxEvent) => void): void {
  listeners.add(l);
  onLeave(() => listeners.delete(l));
}

export function stopEvents(): void {
  eventAbort?.abort();
  eventAbort = null;
}

/** Follows the event stream (it reconnects with Last-Event-ID itself); starts over after a failure, stops on 401. */
export async function runEvents(): Promise<void> {
  stopEvents();
  const ctl = new AbortController();
  eventAbort = ctl;
  let lastEventId: number | undefined;
  while (!ctl.signal.aborted) {
    try {
      const stream = api().events({
        signal: ctl.signal,
        lastEventId,
        onState: (state, detail) =>
          say(
            state === 'open' ? 'live: connected to the event stream' : `event stream: ${detail ?? 'dropped'}; reconnecting`,
            state !== 'open',
          ),
      });
      for await (const ev of stream) {
        lastEventId = ev.id;
        events.push(ev);
        if (events.length > 500) events.shift();
        for (const l of listeners) l(ev);
      }
    } catch (e) {
      if (ctl.signal.aborted || isUnauthorized(e)) return;
      say(`event stream: ${errText(e)}; reconnecting`, true);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}
