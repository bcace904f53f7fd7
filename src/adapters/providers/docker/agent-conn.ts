import { createConnection, type Socket } from 'node:net';
import { safeEqual } from '../../../core/auth/worker-credentials.js';

/*
 * One connection to a container's sbx-agent (docs/agent.md): frames
 * [u32 len][u32 stream id][u8 type][payload], little-endian, len = 5 + payload length.
 */
export const T = {
  EXEC: 1,
  STDIN: 2,
  EOF: 3,
  SIGNAL: 4,
  CREDIT: 5,
  READ: 16,
  WRITE: 17,
  WDATA: 18,
  WEND: 19,
  STAT: 20,
  CANCEL: 21,
  WATCH: 22,
} as const;
export const R = {
  HELLO: 128,
  STARTED: 129,
  STDOUT: 130,
  STDERR: 131,
  EXIT: 132,
  ERROR: 133,
  SIZE: 134,
  DATA: 135,
  END: 136,
  STAT: 137,
  STDIN_ACK: 138,
  WEVENT: 139,
} as const;
export const STAGE = { CHDIR: 1, EXEC: 2, FILE: 3, PROTO: 4 } as const;

/** Biggest payload sent to the agent in one frame (its bound is 1 MiB + 4 KiB). */
export const MAX_CHUNK = 1024 * 1024;
/**
 * Biggest frame taken from the agent (it sends at most 256 KiB of data at once). The sandbox can
 * read its own token and stand in for its agent: a bigger frame ends the connection, never memory.
 */
const MAX_FRAME_IN = 1024 * 1024;

export interface StreamHandler {
  /** `payload` may be kept: the receive buffers are never written again once parsed. */
  frame(type: number, payload: Buffer): void;
  /** The connection ended under the stream (the agent died or the socket broke). */
  lost(): void;
}

export interface Hello {
  version: number;
  uid: number;
  gid: number;
}

export class AgentConnection {
  private readonly handlers = new Map<number, StreamHandler>();
  private nextId = 1;
  private buf: Buffer = Buffer.alloc(0);
  /** Bytes the frame at the head of `buf` needs; pieces gathered until then. */
  private need = 9;
  private parts: Buffer[] = [];
  private partsLen = 0;
  private closedFlag = false;
  private readonly closeListeners: Array<() => void> = [];

  private constructor(
    private readonly socket: Socket,
    readonly hello: Hello,
  ) {}

  /**
   * Connects and waits for the agent's hello. Its token must be `token`: a socket swapped for a
   * link to anything else (another sandbox's agent, a host service) is refused before a byte is sent.
   */
  static connect(path: string, token: string, timeoutMs: number): Promise<AgentConnection> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      let buf = Buffer.alloc(0);
      const fail = (err: Error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(() => fail(new Error('agent: no hello in time')), timeoutMs);
      socket.on('error', fail);
      const onData = (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        if (buf.length < 4) return;
        const len = buf.readUInt32LE(0);
        if (len > 4096) return fail(new Error('agent: bad hello'));
        if (buf.length < 4 + len) return;
        const type = buf[8];
        const payload = buf.subarray(9, 4 + len);
        // Constant time: the token is what keeps a swapped socket from standing in for the agent.
        if (type !== R.HELLO || payload.length < 12 || !safeEqual(payload.subarray(12).toString('utf8'), token))
          return fail(new Error('agent: hello refused'));
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', fail);
        socket.setNoDelay(true);
        const conn = new AgentConnection(socket, {
          version: payload.readUInt32LE(0),
          uid: payload.readUInt32LE(4),
          gid: payload.readUInt32LE(8),
        });
        conn.attach(buf.subarray(4 + len));
        resolve(conn);
      };
      socket.on('data', onData);
    });
  }

  private attach(rest: Buffer): void {
    this.socket.on('data', (chunk: Buffer) => this.input(chunk));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => this.closed());
    if (rest.length > 0) this.input(rest);
  }

  get alive(): boolean {
    return !this.closedFlag;
  }

  onClose(fn: () => void): void {
    if (this.closedFlag) fn();
    else this.closeListeners.push(fn);
  }

  open(handler: StreamHandler): number {
    const id = this.nextId++;
    if (this.nextId > 0x7fffffff) this.nextId = 1;
    this.handlers.set(id, handler);
    return id;
  }

  release(id: number): void {
    this.handlers.delete(id);
  }

  /** Queues a frame; false when the socket's buffer is full (wait for `drained`). */
  send(id: number, type: number, ...parts: Uint8Array[]): boolean {
    if (this.closedFlag) return false;
    const size = parts.reduce((n, p) => n + p.byteLength, 0);
    const head = Buffer.allocUnsafe(9);
    head.writeUInt32LE(5 + size, 0);
    head.writeUInt32LE(id, 4);
    head[8] = type;
    if (size <= 16 * 1024) return this.socket.write(Buffer.concat([head, ...parts]));
    this.socket.cork();
    let ok = this.socket.write(head);
    for (const p of parts) ok = this.socket.write(p);
    this.socket.uncork();
    return ok;
  }

  drained(): Promise<void> {
    if (this.closedFlag || !this.socket.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private input(chunk: Buffer): void {
    // A frame's pieces are joined once, when the whole frame is here (not once per socket read).
    if (this.parts.length > 0) {
      this.parts.push(chunk);
      this.partsLen += chunk.length;
      if (this.partsLen < this.need) return;
      chunk = Buffer.concat(this.parts, this.partsLen);
      this.parts = [];
      this.partsLen = 0;
      this.buf = Buffer.alloc(0);
    } else if (this.buf.length > 0 && this.buf.length + chunk.length < this.need) {
      this.parts = [this.buf, chunk];
      this.partsLen = this.buf.length + chunk.length;
      return;
    }
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let off = 0;
    while (this.buf.length - off >= 9) {
      const len = this.buf.readUInt32LE(off);
      if (len < 5 || len > MAX_FRAME_IN) {
        this.socket.destroy();
        return;
      }
      if (this.buf.length - off < 4 + len) {
        this.need = 4 + len;
        break;
      }
      const id = this.buf.readUInt32LE(off + 4);
      const type = this.buf[off + 8]!;
      const payload = this.buf.subarray(off + 9, off + 4 + len);
      off += 4 + len;
      this.handlers.get(id)?.frame(type, payload);
    }
    this.buf = off === this.buf.length ? Buffer.alloc(0) : this.buf.subarray(off);
    if (this.buf.length < 9) this.need = 9;
  }

  private closed(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    const hs = [...this.handlers.values()];
    this.handlers.clear();
    for (const h of hs) h.lost();
    for (const fn of this.closeListeners.splice(0)) fn();
  }
}

/** A small queue between frame callbacks and an async consumer. */
export class Inbox<V extends object> {
  private readonly items: V[] = [];
  private waiter: (() => void) | undefined;
  /** Payload bytes queued and not yet taken. */
  bytes = 0;

  push(v: V): void {
    this.items.push(v);
    this.bytes += sizeOf(v);
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** The next item if one is queued now (no waiting); undefined otherwise. */
  peek(): V | undefined {
    return this.items[0];
  }

  /** Takes the queued item `peek` showed. */
  take(): V | undefined {
    const v = this.items.shift();
    if (v) this.bytes -= sizeOf(v);
    return v;
  }

  async next(signal?: AbortSignal): Promise<V | undefined> {
    while (this.items.length === 0) {
      if (signal?.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          this.waiter = undefined;
          resolve();
        };
        this.waiter = done;
        signal?.addEventListener('abort', done, { once: true });
      });
    }
    const v = this.items.shift();
    if (v) this.bytes -= sizeOf(v);
    return v;
  }
}

function sizeOf(v: object): number {
  const p = (v as { payload?: Buffer }).payload;
  return p ? p.length : 0;
}
