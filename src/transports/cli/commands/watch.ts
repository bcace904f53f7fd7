import type { SbxEvent } from '../../../client/types.js';
import type { CliContext } from '../context.js';
import type { CommandSpec } from '../spec.js';

/** One plain line per event: `2025-01-01T10:00:00.000Z exec.completed sb-1 exit_code=0`. */
export function eventLine(ev: SbxEvent, summarize: (d: Record<string, unknown> | undefined) => string): string {
  return [ev.timestamp, ev.type, ev.sandbox_id ?? '-', summarize(ev.data)].filter((p) => p !== '').join(' ');
}

function plainSummary(data: Record<string, unknown> | undefined): string {
  if (!data) return '';
  return Object.entries(data)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

export const watchCommand: CommandSpec = {
  name: 'watch',
  summary: 'follow the event stream (live view on a terminal, one line per event otherwise)',
  description: 'Reconnects by itself after a drop and resumes after the last event seen (Last-Event-ID).',
  options: [
    {
      flags: '--types <kinds>',
      description: 'event kinds or group.* wildcards, comma-separated (e.g. sandbox.*,exec.timeout)',
      kind: 'list',
    },
    { flags: '--sandbox <id>', description: 'only events of this sandbox' },
    { flags: '--since <event-id>', description: 'replay history after this event id' },
  ],
  examples: ['sbx watch', 'sbx watch --types exec.* --sandbox $ID', 'sbx watch --json | jq .type'],
  async run(ctx, opts: { types?: string[]; sandbox?: string; since?: string }) {
    const live = ctx.out.isTTY && !ctx.out.json;
    const view = live ? await (await import('../output/watch-view.js')).startWatchView(ctx.out, ctx.client.url) : undefined;
    const onState = (state: 'open' | 'reconnecting', detail?: string) => {
      if (view) view.setState(state, detail);
      else if (state === 'reconnecting') ctx.out.note(`sbx: connection lost${detail ? ` (${detail})` : ''}; reconnecting…`);
    };
    try {
      const stream = ctx.client.events({
        types: opts.types,
        sandboxId: opts.sandbox,
        lastEventId: opts.since,
        signal: ctx.signal,
        onState,
      });
      for await (const ev of stream) print(ctx, ev, view);
    } finally {
      await view?.close();
    }
    return 0;
  },
};

function print(ctx: CliContext, ev: SbxEvent, view?: { push(ev: SbxEvent): void }): void {
  if (view) view.push(ev);
  else if (ctx.out.json) ctx.out.jsonLine(ev);
  else ctx.out.line(eventLine(ev, plainSummary));
}
