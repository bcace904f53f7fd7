/**
 * The answer side of the minimal HTTP/1.1 client (net-transport.ts): the status line and headers,
 * then the body by its framing (Content-Length, chunked, or until the server closes), handed out
 * as byte chunks the consumer pulls. Body bytes are views of the socket's buffers (no copy) and the
 * socket is paused while more than HIGH_WATER bytes wait unread, so a slow consumer holds the
 * sender back as node:http's body does.
 */
import type { Socket } from 'node:net';
import type { ResponseBody, TransportResponse } from './transport.js';

/** Largest answer head (status line and headers) read; node:http's default limit is 16 KiB. */
const MAX_HEAD = 64 * 1024;
/** Longest chunk-size or trailer line. */
const MAX_LINE = 8 * 1024;
/** Unread body bytes above which the socket is paused. */
const HIGH_WATER = 64 * 1024;

/** Headers whose repeats are dropped (the first stays), as node:http does; set-cookie is a list; others join with ", ". */
const FIRST_WINS = new Set(['content-type', 'content-length', 'location', 'etag', 'last-modified', 'server', 'retry-after', 'date']);

export function parseError(reason: string, code: string): Error {
  return Object.assign(new Error(`Parse Error: ${reason}`), { code });
}

/** What node:http reports when the connection closes before the answer is complete. */
export function connectionReset(message: 'socket hang up' | 'aborted'): Error {
  return Object.assign(new Error(message), { code: 'ECONNRESET' });
}

type Framing = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };
type ChunkState = 'size' | 'data' | 'crlf' | 'trailer';

/**
 * One answer read off one socket. `feed` takes the socket's bytes; `head` resolves with the
 * response once its head is complete; `fail` ends it with an error (before the head: `head`
 * rejects; after: the body's reader throws it).
 */
export class Http1Response {
  readonly head: Promise<TransportResponse>;
  private resolveHead!: (r: TransportResponse) => void;
  private rejectHead!: (e: Error) => void;
  private headBuf: Buffer | undefined = Buffer.alloc(0);
  private framing: Framing = { kind: 'close' };
  private chunk: ChunkState = 'size';
  private chunkLeft = 0;
  private line = '';
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private complete = false;
  private failure: Error | undefined;
  private cancelled = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly method: string,
    /** Called once when the body is complete, cancelled or failed: the caller releases the socket. */
    private readonly done: () => void,
  ) {
    this.head = new Promise((resolve, reject) => {
      this.resolveHead = resolve;
      this.rejectHead = reject;
    });
  }

  get finished(): boolean {
    return this.complete || this.failure !== undefined || this.cancelled;
  }

  feed(data: Buffer): void {
    if (this.finished) return;
    if (this.headBuf !== undefined) {
      const rest = this.readHead(data);
      if (rest === undefined || rest.length === 0 || this.finished) return;
      data = rest;
    }
    if (this.framing.kind === 'length') this.feedLength(data, this.framing);
    else if (this.framing.kind === 'chunked') this.feedChunked(data);
    else if (this.framing.kind === 'close') this.emit(data);
  }

  /** The socket ended (EOF) or closed. */
  end(): void {
    if (this.finished) return;
    if (this.headBuf !== undefined) this.fail(connectionReset('socket hang up'));
    else if (this.framing.kind === 'close') this.finish();
    else this.fail(connectionReset('aborted'));
  }

  fail(err: Error): void {
    if (this.finished) return;
    this.failure = err;
    if (this.headBuf !== undefined) this.rejectHead(err);
    this.settle();
  }

  /** Accumulates the head; once complete, resolves `head` and returns the bytes after it. */
  private readHead(data: Buffer): Buffer | undefined {
    let buf = this.headBuf!.length === 0 ? data : Buffer.concat([this.headBuf!, data]);
    for (;;) {
      const at = buf.indexOf('\r\n\r\n');
      if (at < 0) {
        if (buf.length > MAX_HEAD) this.fail(parseError('Header overflow', 'HPE_HEADER_OVERFLOW'));
        else this.headBuf = buf;
        return undefined;
      }
      const parsed = parseHead(buf.toString('latin1', 0, at));
      buf = buf.subarray(at + 4);
      if (parsed instanceof Error) {
        this.fail(parsed);
        return undefined;
      }
      // 1xx answers (100 Continue) come before the final one and carry no body.
      if (parsed.status >= 100 && parsed.status < 200 && parsed.status !== 101) continue;
      const framing = this.framingOf(parsed.status, parsed.headers);
      if (framing instanceof Error) {
        this.fail(framing);
        return undefined;
      }
      this.framing = framing;
      this.headBuf = undefined;
      this.resolveHead({ status: parsed.status, headers: parsed.headers, body: this.body() });
      if (framing.kind === 'none' || (framing.kind === 'length' && framing.left === 0)) this.finish();
      return buf;
    }
  }

  private framingOf(status: number, headers: TransportResponse['headers']): Framing | Error {
    if (this.method === 'HEAD' || status === 204 || status === 304 || status < 200) return { kind: 'none' };
    const te = headers['transfer-encoding'];
    if (te !== undefined) {
      if (/(?:^|,)\s*chunked\s*$/i.test(String(te))) return { kind: 'chunked' };
      return { kind: 'close' };
    }
    const cl = headers['content-length'];
    if (cl === undefined) return { kind: 'close' };
    if (!/^\d{1,15}$/.test(String(cl))) return parseError('Invalid character in Content-Length', 'HPE_INVALID_CONTENT_LENGTH');
    return { kind: 'length', left: Number(cl) };
  }

  private feedLength(data: Buffer, framing: { left: number }): void {
    const piece = data.length > framing.left ? data.subarray(0, framing.left) : data;
    framing.left -= piece.length;
    this.emit(piece);
    if (framing.left === 0) this.finish();
  }

  private feedChunked(data: Buffer): void {
    let i = 0;
    while (i < data.length && !this.finished) {
      if (this.chunk === 'data') {
        const n = Math.min(this.chunkLeft, data.length - i);
        this.emit(data.subarray(i, i + n));
        i += n;
        this.chunkLeft -= n;
        if (this.chunkLeft === 0) this.chunk = 'crlf';
        continue;
      }
      const nl = data.indexOf(10, i);
      if (nl < 0) {
        this.line += data.toString('latin1', i);
        if (this.line.length > MAX_LINE) this.fail(parseError('Chunk line too long', 'HPE_INVALID_CHUNK_SIZE'));
        return;
      }
      const text = (this.line + data.toString('latin1', i, nl)).replace(/\r$/, '');
      this.line = '';
      i = nl + 1;
      this.chunkLine(text);
    }
  }

  /** One line of the chunked framing: a size, the end of a chunk's data, or a trailer. */
  private chunkLine(text: string): void {
    if (this.chunk === 'crlf') {
      if (text !== '') this.fail(parseError('Expected CRLF after chunk', 'HPE_STRICT'));
      this.chunk = 'size';
    } else if (this.chunk === 'trailer') {
      if (text === '') this.finish();
    } else {
      const size = /^([0-9a-fA-F]{1,12})[ \t]*(?:;.*)?$/.exec(text);
      if (!size) return this.fail(parseError('Invalid character in chunk size', 'HPE_INVALID_CHUNK_SIZE'));
      this.chunkLeft = Number.parseInt(size[1]!, 16);
      this.chunk = this.chunkLeft === 0 ? 'trailer' : 'data';
    }
  }

  private emit(piece: Buffer): void {
    if (piece.length === 0) return;
    this.queue.push(piece);
    this.queued += piece.length;
    if (this.queued > HIGH_WATER && !this.socket.isPaused()) this.socket.pause();
    this.notify();
  }

  private finish(): void {
    this.complete = true;
    this.settle();
  }

  private settle(): void {
    this.done();
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private async next(): Promise<IteratorResult<Uint8Array>> {
    for (;;) {
      const piece = this.queue.shift();
      if (piece !== undefined) {
        this.queued -= piece.length;
        if (this.queued <= HIGH_WATER && this.socket.isPaused() && !this.finished) this.socket.resume();
        return { value: piece, done: false };
      }
      if (this.failure) throw this.failure;
      if (this.complete || this.cancelled) return { value: undefined, done: true };
      await new Promise<void>((r) => {
        this.wake = r;
      });
    }
  }

  private cancel(): void {
    if (this.finished) return;
    this.cancelled = true;
    this.queue.length = 0;
    this.queued = 0;
    this.settle();
  }

  private async collect(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (;;) {
      const r = await this.next();
      if (r.done) return Buffer.concat(parts);
      parts.push(r.value as Buffer);
    }
  }

  private body(): ResponseBody {
    return {
      text: async () => (await this.collect()).toString('utf8'),
      arrayBuffer: async () => {
        const b = await this.collect();
        return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
      },
      cancel: () => this.cancel(),
      [Symbol.asyncIterator]: () => ({
        next: () => this.next(),
        return: async () => {
          this.cancel();
          return { value: undefined, done: true };
        },
      }),
    };
  }
}

/** Status line and headers (lower-case names, repeats combined as node:http does), or the parse error. */
function parseHead(text: string): { status: number; headers: TransportResponse['headers'] } | Error {
  const lines = text.split('\r\n');
  const status = /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: |$)/.exec(lines[0]!);
  if (!status) return parseError('Invalid response status', 'HPE_INVALID_STATUS');
  const headers: TransportResponse['headers'] = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(line.slice(0, colon))) {
      return parseError('Invalid header token', 'HPE_INVALID_HEADER_TOKEN');
    }
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).trim();
    const had = headers[name];
    if (name === 'set-cookie') headers[name] = [...((had as string[] | undefined) ?? []), value];
    else if (had === undefined) headers[name] = value;
    else if (!FIRST_WINS.has(name)) headers[name] = `${had}, ${value}`;
  }
  return { status: Number(status[1]), headers };
}
