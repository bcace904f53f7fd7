import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SbxError } from '../../core/errors.js';
import type { HttpDeps } from './deps.js';
import { realmOf } from './realm.js';
import { MemoryRelief } from './memory-relief.js';

/** Default of `server.max_inflight_mb`. */
export const DEFAULT_MAX_INFLIGHT_BYTES = 256 * 1024 * 1024;
/** Seconds a client refused for memory is asked to wait. */
export const INFLIGHT_RETRY_AFTER_S = 1;
/**
 * Route config key: the route's JSON body streams where it goes (the file write, file-upload.ts),
 * so it holds STREAMED_UPLOAD_BYTES of the budget — its queue and slices — not its whole length.
 */
export const STREAMED_UPLOAD = 'sbxStreamedUpload';
export const STREAMED_UPLOAD_BYTES = 2 * 1024 * 1024;

/**
 * One byte budget for what the server holds for requests in flight: request bodies being received
 * and buffered exec output. A request that would go over it is refused with 503 `unavailable` and
 * `Retry-After` instead of growing the process's memory (`server.max_inflight_mb`).
 */
export class InflightBudget {
  private used = 0;
  private readonly relief = new MemoryRelief();
  private readonly givers = new Set<() => void>();

  constructor(readonly capacity: number) {}

  /** Takes `n` bytes if they fit; false (nothing taken) when they do not. */
  take(n: number): boolean {
    if (n <= 0) return true;
    if (this.used + n > this.capacity) return false;
    this.used += n;
    this.relief.took(n);
    return true;
  }

  give(n: number): void {
    if (n <= 0) return;
    this.used = Math.max(0, this.used - n);
    // Emptied after a burst: hand the memory the burst grew back to the system.
    if (this.used === 0) this.relief.idle();
    for (const f of this.givers) f();
  }

  /** Calls `f` after every give (what waits for room listens to); returns the unsubscribe. */
  onGive(f: () => void): () => void {
    this.givers.add(f);
    return () => this.givers.delete(f);
  }

  /** Bytes held now (the `sbx_inflight_bytes` figure). */
  get inflight(): number {
    return this.used;
  }
}

/** The refusal for a request over the budget (503 with Retry-After, set by the error handler). */
export function overBudget(): SbxError {
  return new SbxError('unavailable', 'the server holds too much in-flight data right now; retry later (server.max_inflight_mb)', {
    retry_after_s: INFLIGHT_RETRY_AFTER_S,
  });
}

/** Bytes a request holds, given back once when its response ends or its connection goes. */
class Holding {
  private held = 0;
  private done = false;

  constructor(private readonly budget: InflightBudget) {}

  take(n: number): boolean {
    if (this.done) return true;
    if (!this.budget.take(n)) return false;
    this.held += n;
    return true;
  }

  release(): void {
    if (this.done) return;
    this.done = true;
    this.budget.give(this.held);
    this.held = 0;
  }
}

/** Counts a body without Content-Length as it streams in (up to `cap` bytes); over the budget it fails with 503. */
class Counted extends Transform {
  private counted = 0;

  constructor(
    private readonly holding: Holding,
    private readonly reply: FastifyReply,
    private readonly cap = Number.POSITIVE_INFINITY,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    const n = Math.min(chunk.byteLength, this.cap - this.counted);
    this.counted += n;
    if (!this.holding.take(n)) {
      this.reply.header('Retry-After', String(INFLIGHT_RETRY_AFTER_S));
      cb(overBudget());
      return;
    }
    cb(null, chunk);
  }
}

/**
 * Request bodies against the in-flight budget: with Content-Length the whole length is taken before
 * the body is read (refused at once when it does not fit), without it bytes are taken as they
 * arrive. Registered after auth, so a refused credential costs nothing. Everything is given back
 * when the response ends, the request fails, or the client goes away.
 */
export function inflightPlugin(app: FastifyInstance, deps: HttpDeps): void {
  const budget = deps.inflight ?? (deps.inflight = new InflightBudget(DEFAULT_MAX_INFLIGHT_BYTES));
  app.addHook('preParsing', async (request: FastifyRequest, reply: FastifyReply, payload) => {
    // E2B's envd plane reads its bodies itself from the raw request (streamed into the sandbox, or
    // held against this budget by its multipart reader): nothing may read them here.
    if (realmOf(request.routeOptions.url ?? '') === 'envd') return payload;
    const length = Number(request.headers['content-length'] ?? NaN);
    const chunked = request.headers['transfer-encoding'] !== undefined;
    if (!chunked && !(length > 0)) return payload;
    const holding = new Holding(budget);
    reply.raw.once('close', () => holding.release());
    request.raw.once('error', () => holding.release());
    // A streamed upload holds what it queues (at most STREAMED_UPLOAD_BYTES), not its whole length.
    const streamed =
      (request.routeOptions.config as unknown as Record<string, unknown> | undefined)?.[STREAMED_UPLOAD] === true &&
      request.headers['content-type']?.toLowerCase().startsWith('application/json') === true;
    const cap = streamed ? STREAMED_UPLOAD_BYTES : Number.POSITIVE_INFINITY;
    if (!chunked && Number.isFinite(length)) {
      if (!holding.take(Math.min(length, cap))) {
        reply.header('Retry-After', String(INFLIGHT_RETRY_AFTER_S));
        // The body is never read: the connection closes after the answer.
        reply.header('Connection', 'close');
        throw overBudget();
      }
      return payload;
    }
    return payload.pipe(new Counted(holding, reply, cap));
  });
}
