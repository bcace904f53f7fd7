import type { ServerResponse } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { WatchEvent, WatchQuery } from '../../../contracts/files.js';
import type { StampedWatchEvent } from '../../../core/sandboxes/watch.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
/** SSE comment keep-alives, so proxies keep a quiet watch open. */
const KEEP_ALIVE_MS = 15_000;

/** The wire form of one event: `old_path` only on renames, no `path` on `overflow`. */
export function watchLine(ev: StampedWatchEvent): string {
  return JSON.stringify(
    ev.type === 'overflow'
      ? { type: ev.type, ts: ev.ts }
      : ev.old_path !== undefined
        ? { type: ev.type, path: ev.path, old_path: ev.old_path, ts: ev.ts }
        : { type: ev.type, path: ev.path, ts: ev.ts },
  );
}

/**
 * `GET /api/v1/sandboxes/{id}/files/watch` (sbx extension, DESIGN §16): the changes under a
 * directory as they happen, NDJSON (or SSE with `Accept: text/event-stream`). The headers go out
 * once the watch is in place, so a client that has them sees every later change; refusals before
 * that get their status and error body. A client that hangs up frees the watch at once.
 */
export function fileWatchRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const open = new Set<ServerResponse>();
  app.addHook('preClose', async () => {
    for (const raw of [...open]) raw.end();
  });

  app.get<{ Params: { id: string }; Querystring: WatchQuery }>(
    '/api/v1/sandboxes/:id/files/watch',
    {
      schema: {
        tags: ['files'],
        summary: 'Watch a directory: NDJSON events (SSE with Accept: text/event-stream); overflow ends the stream',
        params: IdParams,
        querystring: WatchQuery,
        response: {
          200: {
            description: 'one event per line (NDJSON), or SSE frames `event: <type>` with the event as data',
            content: { 'application/x-ndjson': { schema: WatchEvent }, 'text/event-stream': { schema: WatchEvent } },
          },
          400: ErrorBody,
          404: ErrorBody,
          429: ErrorBody,
          501: ErrorBody,
          503: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const ac = new AbortController();
      const raw = reply.raw;
      raw.once('close', () => ac.abort(new Error('client disconnected')));
      const events = await deps.files.watcher.watchFiles(
        callerOf(request),
        request.params.id,
        request.query.path,
        { recursive: request.query.recursive ?? true },
        ac.signal,
      );
      const sse = String(request.headers.accept ?? '').includes('text/event-stream');
      reply.hijack();
      // Long-lived by design: no idle timeout on this socket (inject's socket has none to set).
      const socket = request.raw.socket as Partial<typeof request.raw.socket>;
      socket.setTimeout?.(0);
      socket.setNoDelay?.(true);
      const headers: Record<string, string | number | string[]> = {};
      for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v as string | number | string[];
      raw.writeHead(200, {
        ...headers,
        'content-type': sse ? 'text/event-stream; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-cache, no-store, no-transform',
        'x-accel-buffering': 'no',
        connection: 'close',
      });
      raw.flushHeaders();
      open.add(raw);
      const keepAlive = sse ? setInterval(() => raw.write(': keep-alive\n\n'), KEEP_ALIVE_MS) : undefined;
      keepAlive?.unref();
      if (sse) raw.write('retry: 2000\n: watching\n\n');
      const it = events[Symbol.asyncIterator]();
      try {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          const line = watchLine(r.value);
          const chunk = sse ? `event: ${r.value.type}\ndata: ${line}\n\n` : `${line}\n`;
          if (!raw.write(chunk)) await drained(raw);
          if (ac.signal.aborted) break;
        }
      } catch (err) {
        request.log.warn({ err }, 'file watch stream failed');
      } finally {
        clearInterval(keepAlive);
        open.delete(raw);
        await it.return?.();
        raw.end();
      }
    },
  );
}

/** Resolves when the response takes more, or is gone. */
function drained(raw: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    raw.on('drain', done);
    raw.on('close', done);
  });
}
