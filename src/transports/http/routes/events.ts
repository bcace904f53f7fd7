import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { EventStreamQuery, SbxEvent } from '../../../contracts/observability.js';
import { matches, type EventFilter } from '../../../core/events/bus.js';
import { EVENT_KINDS, type SbxEvent as BusEvent } from '../../../core/events/kinds.js';
import { badRequest } from '../../../core/errors.js';
import { ownerVisible } from '../../../core/sandboxes/caller.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { openStreams, type OpenStream } from '../event-streams.js';
import { secretScrubber } from '../metrics/redact.js';

export const KEEP_ALIVE_MS = 15_000;
export const MAX_BUFFERED_EVENTS = 1000;
export const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** How long a dropped or shut-down stream gets to flush its last comment before the socket goes. */
const LINGER_MS = 2000;

const GROUPS = new Set(EVENT_KINDS.map((k) => k.split('.')[0]));

/** `?types=` → kinds and `group.*` wildcards; unknown names are a 400 that lists the valid ones. */
export function parseTypes(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const types = raw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  for (const t of types) {
    const ok = t === '*' || (EVENT_KINDS as readonly string[]).includes(t) || (t.endsWith('.*') && GROUPS.has(t.slice(0, -2)));
    if (!ok) throw badRequest(`unknown event type "${t}" (valid: ${EVENT_KINDS.join(', ')}, or a group wildcard such as exec.*)`);
  }
  return types;
}

function parseLastId(raw: string | undefined, where: string): number | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  if (!/^\d{1,15}$/.test(raw.trim())) throw badRequest(`${where} must be a non-negative integer event id`);
  return Number(raw.trim());
}

/** One SSE frame; JSON has no raw newlines, so one `data:` line always suffices. */
export function sseFrame(event: BusEvent, scrub: (s: string) => string = (s) => s): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${scrub(JSON.stringify(event))}\n\n`;
}

/**
 * `GET /api/v1/events` (DESIGN.md §3): SSE with ids, `Last-Event-ID` replay from history, type and
 * sandbox filters, comment keep-alives and no write timeout. Each subscriber has a bounded
 * buffer; one that falls too far behind gets `: dropped: too slow` and is closed, so a stalled
 * client never holds back publishers or other subscribers.
 */
export function eventRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const open = openStreams(deps);
  const scrub = secretScrubber(deps.secrets);

  app.addHook('preClose', async () => {
    for (const s of [...open]) s.close(': server shutting down\n\n');
  });

  app.get<{ Querystring: EventStreamQuery; Headers: { 'last-event-id'?: string } }>(
    '/api/v1/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Server-sent event stream (replay with Last-Event-ID, filter by types and sandbox_id)',
        querystring: EventStreamQuery,
        headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ description: 'Replay history after this event id' })) }),
        response: {
          200: {
            description: 'text/event-stream frames: id, event (the kind), data (event JSON)',
            content: { 'text/event-stream': { schema: SbxEvent } },
          },
          400: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const q = request.query;
      const filter: EventFilter = { types: parseTypes(q.types), sandbox_id: q.sandbox_id || undefined };
      const headerId = request.headers['last-event-id'];
      let lastId =
        parseLastId(Array.isArray(headerId) ? headerId[0] : headerId, 'Last-Event-ID') ?? parseLastId(q.last_event_id, 'last_event_id');
      const visible = visibility(request, deps);
      // Local ids restart with the process: an id from the future means a restart, so replay
      // everything kept. Journal ids (replicas) never restart: a newer id was seen on a replica this
      // one has not caught up with yet, and the live stream skips up to it.
      if (lastId !== undefined && !deps.bus.journalled && lastId > deps.bus.lastId()) lastId = 0;
      startStream(request, reply, deps, { filter, lastId, visible, scrub, open });
    },
  );
}

/** With ownership enforced, a non-admin sees its own events and those with no (explicit) owner. */
function visibility(request: FastifyRequest, deps: HttpDeps): (e: BusEvent) => boolean {
  if (!deps.settings.enforce_ownership || request.sbxAdmin === true) return () => true;
  const caller = callerOf(request);
  return (e) => ownerVisible(e.owner_id, caller);
}

interface StreamSetup {
  filter: EventFilter;
  lastId: number | undefined;
  visible: (e: BusEvent) => boolean;
  scrub: (s: string) => string;
  open: Set<OpenStream>;
}

function startStream(request: FastifyRequest, reply: FastifyReply, deps: HttpDeps, setup: StreamSetup): void {
  const opts = deps.eventStream ?? {};
  const keepAliveMs = opts.keepAliveMs ?? KEEP_ALIVE_MS;
  const maxEvents = opts.maxBufferedEvents ?? MAX_BUFFERED_EVENTS;
  const maxBytes = opts.maxBufferedBytes ?? MAX_BUFFERED_BYTES;
  const { filter, visible, scrub } = setup;
  const raw = reply.raw;

  reply.hijack();
  // Long-lived by design: no idle or write timeout on this socket.
  // (fastify's inject hands a socket without these: the unit tier streams events through it.)
  const socket = request.raw.socket as Partial<typeof request.raw.socket>;
  socket.setTimeout?.(0);
  socket.setNoDelay?.(true);
  const headers: Record<string, string | number | string[]> = {};
  for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
  raw.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    // The stream only ends when sbx drops or shuts it: the connection goes with it.
    connection: 'close',
    'x-accel-buffering': 'no',
  });

  // The whole setup is synchronous, so nothing is published between the history read and the
  // subscription below. A replay may exceed the live limits once: it is what the client asked for.
  const replay = (setup.lastId !== undefined ? deps.bus.since(setup.lastId, filter) : []).filter(visible).map((e) => sseFrame(e, scrub));
  const limitEvents = maxEvents + replay.length;
  const limitBytes = maxBytes + replay.reduce((n, f) => n + Buffer.byteLength(f), 0);
  const oldest = deps.bus.recent()[0]?.id;

  const queue: string[] = [];
  let queuedBytes = 0;
  let writable = true;
  let closed = false;

  const write = (chunk: string) => {
    if (closed) return;
    if (writable && queue.length === 0) {
      writable = raw.write(chunk);
      return;
    }
    queue.push(chunk);
    queuedBytes += Buffer.byteLength(chunk);
    if (queue.length > limitEvents || queuedBytes > limitBytes) {
      request.log.warn({ queued: queue.length, bytes: queuedBytes }, 'event subscriber dropped: too slow');
      stream.close(': dropped: too slow\n\n');
    }
  };
  raw.on('drain', () => {
    writable = true;
    while (!closed && writable && queue.length > 0) {
      const chunk = queue.shift()!;
      queuedBytes -= Buffer.byteLength(chunk);
      writable = raw.write(chunk);
    }
  });

  const cleanup = () => {
    closed = true;
    unsubscribe();
    clearInterval(keepAlive);
    setup.open.delete(stream);
    queue.length = 0;
    queuedBytes = 0;
  };
  const stream: OpenStream = {
    close(comment) {
      if (closed) return;
      cleanup();
      raw.end(comment);
      // A client that does not read never lets the end flush: cut the socket after a grace period.
      setTimeout(() => socket.destroy?.(), LINGER_MS).unref();
    },
  };
  setup.open.add(stream);
  raw.on('close', () => {
    cleanup();
    // The client hung up (possibly half-closed): release our side of the socket too.
    socket.destroy?.();
  });
  raw.on('error', () => cleanup());

  const seen = setup.lastId ?? 0;
  const unsubscribe = deps.bus.subscribe((event) => {
    if (event.id > seen && matches(event, filter) && visible(event)) write(sseFrame(event, scrub));
  });
  const keepAlive = setInterval(() => write(': keep-alive\n\n'), keepAliveMs);
  keepAlive.unref();

  write(`retry: 2000\n: connected\n\n`);
  if (setup.lastId !== undefined && oldest !== undefined && setup.lastId < oldest - 1) {
    write(`: gap: events ${setup.lastId + 1} to ${oldest - 1} are no longer in history\n\n`);
  }
  for (const frame of replay) write(frame);
}
