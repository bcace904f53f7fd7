/**
 * The live `sbx watch` view (ink): every event printed once above a status line that shows the
 * connection state and counts. Loaded only when stdout is a terminal — ink and React never load
 * on other paths.
 */
import type { SbxEvent } from '../../../client/types.js';

export interface WatchView {
  push(event: SbxEvent): void;
  setState(state: 'connecting' | 'open' | 'reconnecting', detail?: string): void;
  close(): Promise<void>;
}

interface Snapshot {
  events: SbxEvent[];
  state: 'connecting' | 'open' | 'reconnecting';
  detail?: string;
  counts: Record<string, number>;
}

const GROUP_COLOR: Record<string, string> = {
  sandbox: 'green',
  exec: 'cyan',
  file: 'blue',
  quota: 'magenta',
  spawn: 'yellow',
  operation: 'red',
  resource: 'red',
  provider: 'red',
  reconcile: 'yellow',
};

/** One-line summary of an event's data (`command=ls exit_code=0`). */
export function summarizeData(data: Record<string, unknown> | undefined, max = 100): string {
  if (!data) return '';
  const text = Object.entries(data)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Renders the view on `stdout` (a TTY stream). */
export async function startWatchView(streams: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream }, url: string): Promise<WatchView> {
  const [{ render, Box, Static, Text }, React] = await Promise.all([import('ink'), import('react')]);
  const h = React.createElement;

  let snap: Snapshot = { events: [], state: 'connecting', counts: {} };
  const listeners = new Set<() => void>();
  const update = (next: Partial<Snapshot>) => {
    snap = { ...snap, ...next };
    for (const l of listeners) l();
  };
  const subscribe = (l: () => void) => {
    listeners.add(l);
    return () => listeners.delete(l);
  };

  function EventLine({ ev }: { ev: SbxEvent }) {
    const group = ev.type.split('.')[0] ?? '';
    const time = ev.timestamp.slice(11, 19);
    return h(
      Box,
      null,
      h(Text, { dimColor: true }, `${time} `),
      h(Text, { color: GROUP_COLOR[group] ?? 'white', bold: true }, ev.type.padEnd(20)),
      h(Text, null, ` ${(ev.sandbox_id ?? '-').padEnd(14)} `),
      h(Text, { dimColor: true }, summarizeData(ev.data)),
    );
  }

  function App() {
    const s = React.useSyncExternalStore(subscribe, () => snap);
    const total = s.events.length;
    const dot = s.state === 'open' ? h(Text, { color: 'green' }, '●') : h(Text, { color: 'yellow' }, '○');
    const counts = Object.entries(s.counts)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([g, n]) => `${g} ${n}`)
      .join(' · ');
    return h(
      Box,
      { flexDirection: 'column' },
      h(Static, { items: s.events, children: (item: unknown) => h(EventLine, { key: String((item as SbxEvent).id), ev: item as SbxEvent }) }),
      h(
        Box,
        { marginTop: 0 },
        dot,
        h(Text, null, ` ${s.state === 'open' ? 'watching' : s.state} ${url}`),
        h(Text, { dimColor: true }, ` — ${total} event${total === 1 ? '' : 's'}${counts ? ` (${counts})` : ''}${s.detail ? ` — ${s.detail}` : ''}`),
      ),
    );
  }

  const instance = render(h(App), {
    stdout: streams.stdout as NodeJS.WriteStream,
    stderr: streams.stderr as NodeJS.WriteStream,
    patchConsole: false,
    exitOnCtrlC: false,
  });

  return {
    push(ev) {
      const group = ev.type.split('.')[0] ?? 'other';
      update({ events: [...snap.events, ev], counts: { ...snap.counts, [group]: (snap.counts[group] ?? 0) + 1 } });
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
