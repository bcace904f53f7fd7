/**
 * The JSON file write `{path, content, mode?, encoding?}` streamed into the sandbox as it arrives
 * (issue 30): the body's members are scanned as they come (file-write-body.ts), and once `content`
 * starts its bytes are decoded on the fly (upload-decoders.ts) and handed to the provider's
 * streamed write while the rest of the body is still on the wire — the route's handler runs
 * before the body has ended. Memory per upload stays at a few slices, whatever its size.
 *
 * What is known when `content` starts decides the way:
 * - `path` and `encoding` seen: decoded straight into the sandbox (the common `{path, encoding, content}`).
 * - `path` seen, `encoding` not yet: decoded into the sandbox on the guess that the text is base64,
 *   while its raw text is spooled; at the end, the guess confirmed (`encoding: "base64"` came
 *   after) keeps the sandbox's file, else that write is abandoned and the spool is written instead.
 * - `path` not seen yet: the raw text is spooled to a private temporary file and written once the
 *   body is complete.
 * Spools live in a directory of their own under the OS temp dir (mode 0700), removed when the
 * request ends, whatever happened. A write whose body fails leaves no file in the sandbox.
 */
import { createReadStream, createWriteStream, mkdtempSync, type WriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { FastifyRequest } from 'fastify';
import { WriteFileRequest } from '../../contracts/files.js';
import { badRequest, SbxError } from '../../core/errors.js';
import { declaredLength, FileWriteScanner, tooLarge } from './file-write-body.js';
import { Base64Stream, type ByteSink, decodeChunks, rawText, tee, Utf8Stream } from './upload-decoders.js';

/** Bytes queued for the sandbox before the body is paused, and the level at which it resumes. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/**
 * A guessed direct write starts once this much decoded without a miss (or the body has ended and
 * the guess is settled): a small or text body never opens a write it would then abandon.
 */
const GUESS_START = 256 * 1024;
const uploads = new WeakMap<object, Upload>();
const checkBody = TypeCompiler.Compile(WriteFileRequest);

/** Thrown reasons of direct writes abandoned for the spool (never reach a client). */
const redirects = new WeakSet<object>();
function useSpool(): SbxError {
  const e = new SbxError('bad_request', 'the upload is written from its spool');
  redirects.add(e);
  return e;
}

/** Decoded bytes on their way to the provider: a bounded queue with room callbacks. */
class UploadPipe implements AsyncIterable<Uint8Array> {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private ended = false;
  private error: unknown;
  private waiter: (() => void) | null = null;
  private started!: () => void;
  /** Resolves when the provider's write may start (see GUESS_START). */
  readonly ready = new Promise<void>((r) => (this.started = r));
  closed = false;

  constructor(
    private readonly onRoom: () => void,
    guessing: boolean,
  ) {
    if (!guessing) this.started();
  }

  /** Ended for the spool: the direct write never starts (or is abandoned). */
  get redirected(): boolean {
    return this.ended && redirects.has(this.error as object);
  }

  /** Nothing of it will be read: what is queued goes, the body flows on. */
  discard(): void {
    this.closed = true;
    this.chunks.length = 0;
    this.bytes = 0;
    this.onRoom();
  }

  get full(): boolean {
    return this.bytes >= HIGH_WATER;
  }

  write(b: Buffer): void {
    if (this.closed || this.ended) return;
    this.chunks.push(b);
    this.bytes += b.length;
    if (this.bytes >= GUESS_START) this.started();
    this.wake();
  }

  end(err?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.error = err;
    this.started();
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    try {
      for (;;) {
        if (this.chunks.length > 0) {
          const c = this.chunks.shift()!;
          const was = this.bytes;
          this.bytes -= c.length;
          if (was >= LOW_WATER && this.bytes < LOW_WATER) this.onRoom();
          yield c;
          continue;
        }
        if (this.ended) {
          if (this.error !== undefined) throw this.error;
          return;
        }
        await new Promise<void>((r) => (this.waiter = r));
      }
    } finally {
      // The provider stopped reading (done or failed): nothing more is kept, the body drains.
      this.closed = true;
      this.chunks.length = 0;
      this.bytes = 0;
      this.onRoom();
    }
  }
}

/** The content's raw text in a private temporary file. */
class Spool implements ByteSink {
  readonly dir = mkdtempSync(join(tmpdir(), 'sbx-upload-'));
  readonly file = join(this.dir, 'content');
  private readonly out: WriteStream;
  private full = false;
  private removed = false;
  readonly done: Promise<void>;

  constructor(onRoom: () => void) {
    this.out = createWriteStream(this.file, { flags: 'wx', mode: 0o600 });
    this.out.on('drain', () => {
      this.full = false;
      onRoom();
    });
    this.done = new Promise((resolve, reject) => {
      this.out.once('finish', resolve);
      this.out.once('error', () => reject(new SbxError('provider_error', 'could not spool the upload')));
    });
    this.done.catch(() => undefined);
  }

  get isFull(): boolean {
    return this.full && !this.removed;
  }

  write(b: Buffer): void {
    if (!this.removed && !this.out.write(b)) this.full = true;
  }

  end(): void {
    this.out.end();
  }

  remove(): Promise<void> {
    this.removed = true;
    this.out.destroy();
    return rm(this.dir, { recursive: true, force: true });
  }
}

/** One upload's way through: see the module comment. */
export class Upload {
  private pipe: UploadPipe | undefined;
  private stage: Base64Stream | Utf8Stream | undefined;
  private spool: Spool | undefined;
  private encoding: unknown;
  private path: unknown;
  private final: Record<string, unknown> | undefined;
  private finalSeen!: () => void;
  private readonly settled = new Promise<void>((r) => (this.finalSeen = r));
  private disposed = false;

  constructor(
    private readonly onRoom: () => void,
    private readonly early: (body: Record<string, unknown>) => void,
  ) {}

  /** True while a stage has more queued than it takes: the body should pause. */
  get full(): boolean {
    return !this.disposed && ((this.pipe?.full ?? false) || (this.spool?.isFull ?? false));
  }

  /** True once the request is over: what still arrives is dropped. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** `content` starts: choose the way and hand the handler the body so far when the path is known. */
  open(fields: Readonly<Record<string, unknown>>): ReturnType<typeof rawText> {
    this.encoding = fields.encoding;
    this.path = fields.path;
    const sinks: ByteSink[] = [];
    if (typeof fields.path !== 'string' || fields.encoding === undefined) sinks.push((this.spool = new Spool(this.onRoom)));
    if (typeof fields.path === 'string') {
      this.pipe = new UploadPipe(this.onRoom, fields.encoding === undefined);
      this.stage = fields.encoding === 'utf8' ? new Utf8Stream(this.pipe) : new Base64Stream(this.pipe, fields.encoding === undefined);
      sinks.push(this.stage);
      this.early({ ...fields, content: '' });
    }
    return rawText(sinks.length === 1 ? sinks[0]! : tee(...sinks));
  }

  /** The body is complete and well-formed (`body` with `content` ""): decide what is written. */
  finish(body: Record<string, unknown>): void {
    this.final = body;
    this.finalSeen();
    this.spool?.end();
    const pipe = this.pipe;
    if (!pipe) return;
    try {
      if (body.path !== this.path) throw badRequest('invalid body: path is given more than once');
      if (this.encoding !== undefined && body.encoding !== this.encoding)
        throw badRequest('invalid body: encoding is given more than once');
      if (!checkBody.Check(body)) {
        const e = checkBody.Errors(body).First();
        throw badRequest(`invalid body: ${e?.path ? `${e.path.slice(1)}: ` : ''}${e?.message ?? 'invalid'}`);
      }
      const guessed = this.encoding === undefined;
      if (guessed && (body.encoding !== 'base64' || (this.stage as Base64Stream).failed)) return pipe.end(useSpool());
      this.stage!.end();
      pipe.end();
    } catch (err) {
      pipe.end(err);
    }
  }

  /** The body failed (malformed, too large, cut short) after the handler took it: the write fails with it. */
  fail(err: unknown): void {
    this.finalSeen();
    this.pipe?.end(err);
  }

  /**
   * Runs the write: the direct stream when there is one, else (or when it was abandoned) the
   * spool once the body is complete. `mode` is the body's final `mode`.
   */
  async run(write: (body: AsyncIterable<Uint8Array>, mode: () => string | undefined) => Promise<void>): Promise<void> {
    const mode = () => this.final?.mode as string | undefined;
    try {
      if (this.pipe) {
        await this.pipe.ready;
        if (this.pipe.redirected) this.pipe.discard();
        else {
          try {
            return await write(this.pipe, mode);
          } catch (err) {
            if (!redirects.has(err as object)) throw err;
          }
        }
      }
      await this.settled;
      if (!this.spool || !this.final) throw badRequest('the request body was cut short');
      await this.spool.done;
      await write(decodeChunks(createReadStream(this.spool.file, { highWaterMark: 256 * 1024 }), this.final.encoding), mode);
    } finally {
      await this.dispose();
    }
  }

  /** Removes the spool and stops what is queued (idempotent). */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    if (this.pipe) {
      this.pipe.closed = true;
      this.pipe.end(badRequest('the upload ended'));
    }
    this.onRoom();
    await this.spool?.remove().catch(() => undefined);
  }
}

/** The upload of a body this parser produced, once. */
export function takeUpload(body: unknown): Upload | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const u = uploads.get(body);
  uploads.delete(body);
  return u;
}

/** The upload of a request's body, without taking it (cleanup once the response is out). */
export function uploadOf(body: unknown): Upload | undefined {
  return typeof body === 'object' && body !== null ? uploads.get(body) : undefined;
}

/**
 * The content-type parser of the write route's JSON bodies: hands the route its body as soon as
 * the path is known and streams the rest (see the module comment). Bound by the body limit.
 */
export function streamedUploadParser(bodyLimit: number) {
  return (request: FastifyRequest, payload: NodeJS.ReadableStream, done: (err: Error | null, body?: unknown) => void) => {
    const declared = declaredLength(request);
    if (declared > bodyLimit) return done(tooLarge());
    let answered = false;
    let finished = false;
    const answer = (err: Error | null, body?: Record<string, unknown>) => {
      answered = true;
      if (body) uploads.set(body, upload);
      done(err, body);
    };
    const upload = new Upload(
      () => payload.resume(),
      (body) => answer(null, body),
    );
    const scanner = new FileWriteScanner((f) => upload.open(f));
    let received = 0;
    const fail = (err: unknown) => {
      if (finished) return;
      finished = true;
      payload.removeListener('data', onData);
      // The rest of the body is dropped, also when a stage between the socket and us (the budget's
      // counter) failed and let go of it: the answer can then go out whole.
      payload.resume();
      request.raw.resume();
      if (answered) upload.fail(err);
      else {
        void upload.dispose();
        answer(err as Error);
      }
    };
    const onData = (chunk: Buffer) => {
      // The request is over (answered early and failed): the rest is drained unread.
      if (upload.isDisposed) return fail(badRequest('the upload ended'));
      received += chunk.length;
      if (received > bodyLimit) return fail(tooLarge());
      try {
        scanner.write(chunk);
      } catch (err) {
        return fail(err);
      }
      if (upload.full) payload.pause();
    };
    payload.on('data', onData);
    payload.on('end', () => {
      if (finished) return;
      let body: Record<string, unknown> | undefined;
      try {
        body = scanner.end();
      } catch (err) {
        return fail(err);
      }
      finished = true;
      if (body) upload.finish(body);
      if (!answered) {
        if (!body) void upload.dispose();
        answer(null, body);
      }
    });
    payload.on('error', (err: Error) => fail(err));
    // The client went away mid-body: nothing is written.
    request.raw.once('close', () => {
      if (!request.raw.complete) fail(badRequest('the request body was cut short'));
    });
  };
}
