/**
 * The guest agent's wire protocol (docs/providers/firecracker.md): frames of
 * `[u32 BE header length][u32 BE data length][header: UTF-8 JSON object][data: bytes]`, one
 * operation per connection, over a host-initiated vsock connection (Firecracker's UDS handshake
 * `CONNECT <port>\n` → `OK <hostport>\n`, docs/vsock.md in firecracker-microvm/firecracker).
 */
import { connect, type Socket } from 'node:net';
import { SbxError } from '../../../core/errors.js';

export const MAX_HEADER_BYTES = 1024 * 1024;
export const MAX_DATA_BYTES = 4 * 1024 * 1024;
/** The vsock port the guest agent listens on. */
export const AGENT_VSOCK_PORT = 1024;

export interface Frame {
  header: Record<string, unknown> & { type?: string; op?: string };
  data: Buffer;
}

export function encodeFrame(header: Record<string, unknown>, data: Uint8Array = new Uint8Array(0)): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  if (json.length > MAX_HEADER_BYTES) throw new SbxError('bad_request', 'agent frame header too large');
  if (data.length > MAX_DATA_BYTES) throw new SbxError('internal', 'agent frame data too large (split it)');
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(json.length, 0);
  prefix.writeUInt32BE(data.length, 4);
  return Buffer.concat([prefix, json, data]);
}

/** Splits `data` into frames of at most MAX_DATA_BYTES. */
export function* chunks(data: Uint8Array): Generator<Uint8Array> {
  for (let at = 0; at < data.length; at += MAX_DATA_BYTES) yield data.subarray(at, at + MAX_DATA_BYTES);
}

/**
 * Reads frames from a socket, one `next()` at a time, each with a deadline. A malformed frame,
 * an oversized one or a connection that ends mid-frame is an SbxError; a clean end is `null`.
 */
export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private failure: SbxError | null = null;
  private wake: (() => void) | null = null;

  constructor(
    private readonly socket: Socket,
    private readonly peer = 'the guest agent',
  ) {
    socket.on('data', (c: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, c]) : c;
      // Backpressure: stop reading while a whole frame's worth waits to be taken.
      if (this.buf.length > MAX_HEADER_BYTES + MAX_DATA_BYTES) socket.pause();
      this.poke();
    });
    socket.on('end', () => {
      this.ended = true;
      this.poke();
    });
    socket.on('close', () => {
      this.ended = true;
      this.poke();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      this.failure ??= new SbxError('unavailable', `connection to ${this.peer} failed (${err.code ?? 'error'})`);
      this.poke();
    });
    // The handshake leaves the socket paused; a 'data' listener alone does not resume it.
    socket.resume();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  private take(): Frame | null {
    if (this.buf.length < 8) return null;
    const hlen = this.buf.readUInt32BE(0);
    const dlen = this.buf.readUInt32BE(4);
    if (hlen > MAX_HEADER_BYTES || dlen > MAX_DATA_BYTES) throw new SbxError('provider_error', `${this.peer} sent an oversized frame`);
    if (this.buf.length < 8 + hlen + dlen) return null;
    let header: unknown;
    try {
      header = JSON.parse(this.buf.subarray(8, 8 + hlen).toString('utf8'));
    } catch {
      throw new SbxError('provider_error', `${this.peer} sent a frame whose header is not JSON`);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header))
      throw new SbxError('provider_error', `${this.peer} sent a frame whose header is not an object`);
    const data = Buffer.from(this.buf.subarray(8 + hlen, 8 + hlen + dlen));
    this.buf = this.buf.subarray(8 + hlen + dlen);
    if (this.socket.isPaused() && this.buf.length <= MAX_HEADER_BYTES + MAX_DATA_BYTES) this.socket.resume();
    return { header: header as Frame['header'], data };
  }

  /** The next frame, `null` at a clean end; `timeoutMs` bounds the wait (a guest that hangs), Infinity leaves it to `signal`. */
  async next(timeoutMs: number, signal?: AbortSignal): Promise<Frame | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.take();
      if (frame) return frame;
      if (this.failure) throw this.failure;
      if (this.ended) {
        if (this.buf.length > 0) throw new SbxError('provider_error', `${this.peer} closed the connection mid-frame`);
        return null;
      }
      if (signal?.aborted) throw new SbxError('timeout', `the request to ${this.peer} was cancelled`);
      const left = deadline - Date.now();
      if (left <= 0) throw new SbxError('timeout', `${this.peer} did not answer within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        // Infinity: a running command may be silent for as long as it likes; the signal bounds it.
        const t = Number.isFinite(left) ? setTimeout(done, left) : undefined;
        const onAbort = () => done();
        signal?.addEventListener('abort', onAbort, { once: true });
        this.wake = done;
        function done() {
          clearTimeout(t);
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }
      });
    }
  }
}

/** How the provider reaches a guest's vsock port: a connected stream, handshake done. */
export type VsockConnect = (udsPath: string, port: number, opts: { timeoutMs: number; signal?: AbortSignal }) => Promise<Socket>;

/**
 * Host-initiated vsock through Firecracker's UDS: connect, send `CONNECT <port>\n`, expect
 * `OK <hostport>\n`; bytes after that line belong to the guest's stream and are put back.
 */
export const connectVsock: VsockConnect = (udsPath, port, { timeoutMs, signal }) =>
  new Promise((resolve, reject) => {
    const sock = connect({ path: udsPath });
    let line = Buffer.alloc(0);
    let done = false;
    const fail = (err: SbxError) => {
      if (done) return;
      done = true;
      cleanup();
      sock.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () => fail(new SbxError('timeout', `the guest agent's vsock port did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onAbort = () => fail(new SbxError('timeout', 'connecting to the guest agent was cancelled'));
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      sock.off('data', onData);
    };
    const onData = (c: Buffer) => {
      line = Buffer.concat([line, c]);
      const nl = line.indexOf(0x0a);
      if (nl === -1) {
        if (line.length > 64) fail(new SbxError('provider_error', 'the vsock handshake answer is malformed'));
        return;
      }
      const text = line.subarray(0, nl).toString('latin1');
      if (!/^OK \d+$/.test(text)) return fail(new SbxError('unavailable', `the guest agent is not reachable on vsock port ${port}`));
      done = true;
      cleanup();
      sock.pause();
      const rest = line.subarray(nl + 1);
      if (rest.length) sock.unshift(rest);
      resolve(sock);
    };
    sock.on('connect', () => sock.write(`CONNECT ${port}\n`));
    sock.on('data', onData);
    sock.on('error', (err: NodeJS.ErrnoException) =>
      fail(
        new SbxError(
          'unavailable',
          err.code === 'ENOENT' || err.code === 'ECONNREFUSED'
            ? 'the VM has no vsock socket (it is not running)'
            : `the vsock socket failed (${err.code ?? 'error'})`,
        ),
      ),
    );
    sock.on('close', () => fail(new SbxError('unavailable', `the guest agent is not reachable on vsock port ${port}`)));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
