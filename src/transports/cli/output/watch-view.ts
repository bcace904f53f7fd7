/**
 * The live `sbx watch` view (ink): every event printed once above a status line that shows the
 * connection state and counts. Loaded only when stdout is a terminal — ink and React never load
 * on other paths.
 *
 * Colour comes from the CLI's own chalk instance (`--no-color`, NO_COLOR), never from ink's colour
 * props: those use chalk's global instance, which decides from process.argv and process.env.
 * Event lines are written through ink's stdout writer rather than `<Static>`, which keeps every
 * item (and ink a copy of all static output) for the life of the view.
 */
import type { ChalkInstance } from 'chalk';
import type { SbxEvent } from '../../../client/types.js';

export interface WatchView {
  push(event: SbxEvent): void;
  setState(state: 'connecting' | 'open' | 'reconnecting', detail?: string): void;
  close(): Promise<void>;
}

/** What the view needs of the CLI output: its streams and its colour settings. */
export interface WatchViewOutput {
  readonly streams: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };
  readonly c: ChalkInstance;
}

interface Snapshot {
  state: 'connecting' | 'open' | 'reconnecting';
  detail?: string;
  total: number;
  counts: Record<string, number>;
}

/** Events held while ink is not ready to write them; past this the oldest are dropped. */
export const MAX_PENDING_EVENTS = 1000;
/** Size used when the terminal reports none: 0 columns draws one character per line, 0 rows clears the screen on every redraw. */
const FALLBACK_COLUMNS = 80;
const FALLBACK_ROWS = 24;

type Style = (c: ChalkInstance) => (text: string) => string;

const GROUP_STYLE: Record<string, Style> = {
  sandbox: (c) => c.green,
  exec: (c) => c.cyan,
  file: (c) => c.blue,
  quota: (c) => c.magenta,
  spawn: (c) => c.yellow,
  operation: (c) => c.red,
  resource: (c) => c.red,
  provider: (c) => c.red,
  reconcile: (c) => c.yellow,
};

/** One-line summary of an event's data (`command=ls exit_code=0`). */
export function summarizeData(data: Record<string, unknown> | undefined, max = 100): string {
  if (!data) return '';
  const text = Object.entries(data)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One event as a styled line (no newline). */
export function eventViewLine(ev: SbxEvent, c: ChalkInstance): string {
  const group = ev.type.split('.')[0] ?? '';
  const style = GROUP_STYLE[group]?.(c) ?? c.white;
  return (
    `${c.dim(`${ev.timestamp.slice(11, 19)} `)}${c.bold(style(ev.type.padEnd(20)))} ` +
    `${(ev.sandbox_id ?? '-').padEnd(14)} ${c.dim(summarizeData(ev.data))}`
  );
}

/**
 * `stream` as ink sees it: a terminal reporting 0 (or no) columns or rows gets a usable size.
 * Everything else goes to the real stream.
 */
function withSize(stream: NodeJS.WritableStream): NodeJS.WriteStream {
  return new Proxy(stream as NodeJS.WriteStream, {
    get(target, prop) {
      if (prop === 'columns') return target.columns > 0 ? target.columns : FALLBACK_COLUMNS;
      if (prop === 'rows') return target.rows > 0 ? target.rows : FALLBACK_ROWS;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Renders the view on the output's stdout (a TTY stream). */
export async function startWatchView(out: WatchViewOutput, url: string): Promise<WatchView> {
  const [{ render, Box, Text, useStdout }, React] = await Promise.all([import('ink'), import('react')]);
  const h = React.createElement;
  const { c } = out;

  let snap: Snapshot = { state: 'connecting', total: 0, counts: {} };
  const listeners = new Set<() => void>();
  const update = (next: Partial<Snapshot>) => {
    snap = { ...snap, ...next };
    for (const l of listeners) l();
  };
  const subscribe = (l: () => void) => {
    listeners.add(l);
    return () => listeners.delete(l);
  };

  // ink's writer prints above the live status line and redraws it; set on the first render.
  let write: ((data: string) => void) | undefined;
  let pending: SbxEvent[] = [];
  const emit = (ev: SbxEvent) => write!(`${eventViewLine(ev, c)}\n`);

  function App() {
    const { write: w } = useStdout();
    React.useLayoutEffect(() => {
      write = w;
      const held = pending;
      pending = [];
      for (const ev of held) emit(ev);
    }, [w]);
    const s = React.useSyncExternalStore(subscribe, () => snap);
    const dot = s.state === 'open' ? c.green('●') : c.yellow('○');
    const counts = Object.entries(s.counts)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([g, n]) => `${g} ${n}`)
      .join(' · ');
    const tail = ` — ${s.total} event${s.total === 1 ? '' : 's'}${counts ? ` (${counts})` : ''}${s.detail ? ` — ${s.detail}` : ''}`;
    return h(Box, null, h(Text, null, `${dot} ${s.state === 'open' ? 'watching' : s.state} ${url}${c.dim(tail)}`));
  }

  const instance = render(h(App), {
    stdout: withSize(out.streams.stdout),
    stderr: out.streams.stderr as NodeJS.WriteStream,
    patchConsole: false,
    exitOnCtrlC: false,
  });

  return {
    push(ev) {
      const group = ev.type.split('.')[0] ?? 'other';
      if (write) emit(ev);
      else {
        pending.push(ev);
        if (pending.length > MAX_PENDING_EVENTS) pending = pending.slice(-MAX_PENDING_EVENTS);
      }
      update({ total: snap.total + 1, counts: { ...snap.counts, [group]: (snap.counts[group] ?? 0) + 1 } });
    },
    setState(state, detail) {
      update({ state, detail });
    },
    async close() {
      instance.unmount();
      await instance.waitUntilExit().catch(() => undefined);
    },
  };
}
