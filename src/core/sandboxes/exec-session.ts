/**
 * One interactive exec session (DESIGN.md §3 "WebSocket exec") as a small state machine, free of
 * sockets and JSON: `waiting` → (start) → `running` → (exit, error, or the client gone) → `closed`.
 * The transport parses and validates client messages and hands them here; the session starts the
 * command once, feeds its stdin (telling the transport to pause reading above a high-water mark and
 * resume below a low one) and controls, and reports output, the exit or one error through a sink,
 * then closes. Protocol mistakes (a second start, stdin after stdin_eof, anything before start)
 * end the session with a `bad_request` error.
 */
import { AsyncQueue } from '../async-queue.js';
import { badRequest, isSbxError, SbxError } from '../errors.js';
import type { ExecControl } from '../ports/index.js';
import type { ExecCommand, ExecItem } from './exec.js';

/** A client message, already validated and decoded by the transport. */
export type SessionMessage =
  | { type: 'start'; input: ExecCommand }
  | { type: 'stdin'; data: Uint8Array }
  | { type: 'stdin_eof' }
  | { type: 'control'; control: ExecControl }
  | { type: 'unknown'; name: string };

/** What the session tells its transport. Each returns once the message is taken (flow control). */
export interface SessionSink {
  output(stream: 'stdout' | 'stderr', data: Uint8Array): Promise<void>;
  exit(exit: { exit_code: number | null; duration_ms: number; timed_out: boolean }): Promise<void>;
  error(code: string, message: string): Promise<void>;
  /** The session is over: close the connection (after what was sent). */
  close(): void;
  /** Stop reading client messages for a while (stdin backpressure); `resume` undoes it. */
  pause(): void;
  resume(): void;
}

/** Starts the command: lookups and limits fail before it runs; the items run it. */
export type ExecStarter = (input: ExecCommand, signal: AbortSignal) => Promise<AsyncIterable<ExecItem>>;

export type SessionState = 'waiting' | 'running' | 'closed';

export interface SessionOptions {
  /** Pause above this many stdin bytes waiting for the command (default 1 MiB); resume below `lowWater`. */
  highWater?: number;
  lowWater?: number;
  /** A failure that is not an SbxError (a bug): reported as `internal`, and logged by the caller. */
  onInternalError?: (err: unknown) => void;
}

export class InteractiveExec {
  private current: SessionState = 'waiting';
  private readonly ac = new AbortController();
  private queued = 0;
  private paused = false;
  private readonly stdin = new AsyncQueue<Uint8Array>({ onShift: (b) => this.consumed(b.byteLength) });
  private readonly controls = new AsyncQueue<ExecControl>();
  private readonly high: number;
  private readonly low: number;

  constructor(
    private readonly start: ExecStarter,
    private readonly sink: SessionSink,
    private readonly opts: SessionOptions = {},
  ) {
    this.high = opts.highWater ?? 1024 * 1024;
    this.low = opts.lowWater ?? 256 * 1024;
  }

  /** A method, not a field read, so narrowing never assumes the state unchanged across awaits. */
  private isClosed(): boolean {
    return this.current === 'closed';
  }

  get state(): SessionState {
    return this.current;
  }

  /** Bytes of stdin waiting for the command. */
  get pendingStdin(): number {
    return this.queued;
  }

  /** One client message. Never throws: a protocol mistake ends the session with an error. */
  receive(msg: SessionMessage): void {
    if (this.isClosed()) return;
    try {
      if (this.current === 'waiting') {
        if (msg.type !== 'start')
          throw badRequest(`the first message must be start, not ${JSON.stringify(msg.type === 'unknown' ? msg.name : msg.type)}`);
        this.current = 'running';
        void this.run(msg.input);
        return;
      }
      switch (msg.type) {
        case 'start':
          throw badRequest('the command has already started');
        case 'stdin':
          if (this.stdin.isEnded && !this.stdin.isClosed) throw badRequest('stdin after stdin_eof');
          this.pushStdin(msg.data);
          return;
        case 'stdin_eof':
          this.stdin.end();
          return;
        case 'control':
          this.controls.push(msg.control);
          return;
        case 'unknown':
          throw badRequest(`unknown message type ${JSON.stringify(msg.name)}`);
      }
    } catch (err) {
      void this.fail(err);
    }
  }

  /** A message the transport could not parse or validate: the session ends with its error. */
  reject(err: unknown): void {
    void this.fail(err);
  }

  /** The client went away: the command is killed, nothing more is sent. */
  clientGone(): void {
    this.shutdown();
  }

  private pushStdin(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    // Once the command stopped reading (it ended), further stdin is dropped.
    if (!this.stdin.push(bytes)) return;
    this.queued += bytes.byteLength;
    if (!this.paused && this.queued > this.high) {
      this.paused = true;
      this.sink.pause();
    }
  }

  private consumed(bytes: number): void {
    this.queued -= bytes;
    if (this.paused && this.queued < this.low) {
      this.paused = false;
      this.sink.resume();
    }
  }

  private shutdown(): void {
    if (this.isClosed()) return;
    this.current = 'closed';
    // A paused transport would never read the client's close.
    if (this.paused) {
      this.paused = false;
      this.sink.resume();
    }
    this.ac.abort(new Error('client disconnected'));
    this.stdin.end();
    this.controls.end();
  }

  private async run(input: ExecCommand): Promise<void> {
    // Stdin that came inside the start message goes first.
    if (input.stdin instanceof Uint8Array) this.pushStdin(input.stdin);
    const full: ExecCommand = { ...input, stdin: this.stdin, controls: this.controls };
    let items: AsyncIterable<ExecItem>;
    try {
      items = await this.start(full, this.ac.signal);
    } catch (err) {
      return this.fail(err);
    }
    if (this.isClosed()) return;
    try {
      for await (const item of items) {
        if (this.isClosed()) return;
        if (item.stream === 'exit') {
          await this.sink.exit({ exit_code: item.exit_code, duration_ms: item.duration_ms, timed_out: item.timed_out });
          return this.finish();
        }
        await this.sink.output(item.stream, item.data);
      }
      throw new SbxError('provider_error', 'exec ended without an exit status');
    } catch (err) {
      if (this.isClosed()) return;
      return this.fail(err);
    }
  }

  /** Reports the error as the last message and closes. */
  private async fail(err: unknown): Promise<void> {
    if (this.isClosed()) return;
    const code = isSbxError(err) ? err.code : 'internal';
    const message = isSbxError(err) ? err.message : 'internal server error';
    if (!isSbxError(err)) this.opts.onInternalError?.(err);
    await this.sink.error(code, message);
    this.finish();
  }

  private finish(): void {
    this.shutdown();
    this.sink.close();
  }
}
