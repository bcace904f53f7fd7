/**
 * The WebSocket exec session (DESIGN.md §3 "WebSocket exec"): JSON text messages in (start, stdin,
 * stdin_eof, resize, signal), output, exit or error out, stdin flow control, ping keep-alive.
 * Shared by the API's `/api/v1/sandboxes/{id}/exec/ws` and a worker's `/rpc/exec/ws`: each gives
 * the socket and how to start the command.
 */
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { TSchema } from '@sinclair/typebox';
import type { WebSocket } from 'ws';
import {
  ExecWsResize,
  ExecWsSignal,
  ExecWsStart,
  ExecWsStdin,
  ExecWsStdinEof,
  type ExecWsServerMessage,
  type ExecWsStart as StartMessage,
} from '../contracts/exec.js';
import { AsyncQueue } from '../core/async-queue.js';
import { formatDuration } from '../core/duration.js';
import { badRequest, isSbxError, SbxError } from '../core/errors.js';
import { EXEC_SIGNALS, type ExecControl, type ExecSignal } from '../core/ports.js';
import type { ExecInput, ExecItem } from '../core/sandboxes/exec.js';
import { decodeText, OutputEncoder, type EncodedOutput } from './http/encoding.js';
import { execInput } from './http/routes/exec.js';

/** Pause reading the socket above this many stdin bytes waiting for the command; resume below the low mark. */
const STDIN_HIGH_WATER = 1024 * 1024;
const STDIN_LOW_WATER = 256 * 1024;
/** Ping interval; a client that misses a whole interval is gone and its command is killed. */
const PING_EVERY_MS = 30_000;
const DEFAULT_TERMINAL = { cols: 80, rows: 24 };

let checks: Record<'start' | 'stdin' | 'stdin_eof' | 'resize' | 'signal', TypeCheck<TSchema>> | undefined;
function compiled() {
  checks ??= {
    start: TypeCompiler.Compile(ExecWsStart),
    stdin: TypeCompiler.Compile(ExecWsStdin),
    stdin_eof: TypeCompiler.Compile(ExecWsStdinEof),
    resize: TypeCompiler.Compile(ExecWsResize),
    signal: TypeCompiler.Compile(ExecWsSignal),
  };
  return checks;
}

/** Validates one client message against its schema; bad_request naming the first problem. */
function validated<T>(kind: keyof NonNullable<typeof checks>, value: unknown): T {
  const check = compiled()[kind];
  if (check.Check(value)) return value as T;
  const first = check.Errors(value).First();
  const where = first?.path ? `${first.path.replace(/^\//, '').replace(/\//g, '.')}: ` : '';
  throw badRequest(`invalid ${kind} message: ${where}${first?.message ?? 'invalid'}`);
}

/** `INT`, `sigint`, `SIGINT` → `SIGINT`; bad_request for signals a caller may not send. */
export function execSignal(name: string): ExecSignal {
  const upper = name.trim().toUpperCase();
  const full = upper.startsWith('SIG') ? upper : `SIG${upper}`;
  if (!(EXEC_SIGNALS as readonly string[]).includes(full)) throw badRequest(`unsupported signal ${JSON.stringify(name)} (use one of ${EXEC_SIGNALS.join(', ')})`);
  return full as ExecSignal;
}

type State = 'waiting' | 'running' | 'closed';
type ExitMessage = { type: 'exit'; exit_code: number; duration?: string; timed_out?: boolean };

/** Starts the command of a session: lookups and limits fail before it runs; the items run it. */
export type ExecStarter = (input: ExecInput, signal: AbortSignal) => Promise<AsyncIterable<ExecItem>>;

/**
 * Serves one WebSocket exec session (DESIGN.md §3 "WebSocket exec") on an upgraded socket: the
 * API's route and a worker's `/rpc/exec/ws` both hand their socket and how to start the command.
 */
export function serveExecSocket(socket: WebSocket, start: ExecStarter, onInternalError?: (err: unknown) => void): void {
  new ExecSession(socket, start, onInternalError).open();
}

/** One socket, at most one command. */
class ExecSession {
  private state: State = 'waiting';
  private readonly ac = new AbortController();
  private queuedStdin = 0;
  private paused = false;
  private readonly stdin = new AsyncQueue<Uint8Array>({ onShift: (b) => this.consumed(b.byteLength) });
  private readonly controls = new AsyncQueue<ExecControl>();
  private pinger: NodeJS.Timeout | undefined;
  private alive = true;

  constructor(
    private readonly socket: WebSocket,
    private readonly start: ExecStarter,
    private readonly onInternalError: (err: unknown) => void = () => undefined,
  ) {}

  /** A method, not a field read, so control-flow narrowing never assumes it unchanged across awaits. */
  private get closed(): boolean {
    return this.state === 'closed';
  }

  open(): void {
    const { socket } = this;
    socket.on('message', (data, isBinary) => this.onMessage(data as Buffer | Buffer[] | ArrayBuffer, isBinary));
    socket.on('close', () => this.shutdown());
    socket.on('error', () => this.shutdown());
    socket.on('pong', () => (this.alive = true));
    this.pinger = setInterval(() => {
      if (!this.alive) {
        socket.terminate();
        return;
      }
      this.alive = false;
      socket.ping();
    }, PING_EVERY_MS);
    this.pinger.unref();
  }

  /** The client went away (or the session ended): stop everything the command still holds. */
  private shutdown(): void {
    if (this.closed) return;
    this.state = 'closed';
    clearInterval(this.pinger);
    // A paused socket would never read the client's close frame.
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    this.ac.abort(new Error('client disconnected'));
    this.stdin.end();
    this.controls.end();
  }

  private consumed(bytes: number): void {
    this.queuedStdin -= bytes;
    if (this.paused && this.queuedStdin < STDIN_LOW_WATER) {
      this.paused = false;
      this.socket.resume();
    }
  }

  private onMessage(raw: Buffer | Buffer[] | ArrayBuffer, isBinary: boolean): void {
    if (this.closed) return;
    try {
      if (isBinary) throw badRequest('binary frames are not supported: send JSON text messages');
      const text = Buffer.isBuffer(raw) ? raw.toString('utf8') : Array.isArray(raw) ? Buffer.concat(raw).toString('utf8') : Buffer.from(raw).toString('utf8');
      let msg: unknown;
      try {
        msg = JSON.parse(text);
      } catch (err) {
        throw badRequest(`malformed JSON message: ${(err as Error).message}`);
      }
      if (!msg || typeof msg !== 'object' || Array.isArray(msg)) throw badRequest('a message must be a JSON object');
      const type = (msg as { type?: unknown }).type;
      if (this.state === 'waiting') {
        if (type !== undefined && type !== 'start') throw badRequest(`the first message must be start, not ${JSON.stringify(type)}`);
        this.state = 'running';
        void this.run(validated<StartMessage>('start', msg));
        return;
      }
      this.onRunningMessage(type, msg);
    } catch (err) {
      void this.fail(err);
    }
  }

  private onRunningMessage(type: unknown, msg: object): void {
    switch (type) {
      case 'start':
        throw badRequest('the command has already started');
      case 'stdin': {
        const m = validated<{ data: string; encoding?: 'utf8' | 'base64' }>('stdin', msg);
        if (this.stdin.isEnded && !this.stdin.isClosed) throw badRequest('stdin after stdin_eof');
        this.pushStdin(decodeText(m.data, m.encoding, 'stdin data'));
        return;
      }
      case 'stdin_eof':
        validated('stdin_eof', msg);
        this.stdin.end();
        return;
      case 'resize': {
        const m = validated<{ cols: number; rows: number }>('resize', msg);
        this.controls.push({ type: 'resize', cols: m.cols, rows: m.rows });
        return;
      }
      case 'signal': {
        const m = validated<{ signal: string }>('signal', msg);
        this.controls.push({ type: 'signal', signal: execSignal(m.signal) });
        return;
      }
      default:
        throw badRequest(`unknown message type ${JSON.stringify(type)}`);
    }
  }

  private pushStdin(bytes: Buffer): void {
    if (bytes.byteLength === 0) return;
    // Once the command stopped reading (it ended), further stdin is dropped.
    if (!this.stdin.push(bytes)) return;
    this.queuedStdin += bytes.byteLength;
    if (!this.paused && this.queuedStdin > STDIN_HIGH_WATER) {
      this.paused = true;
      this.socket.pause();
    }
  }

  private async run(start: StartMessage): Promise<void> {
    let input: ExecInput;
    try {
      const { type: _t, tty, cols, rows, stream: _s, exit_record: _e, stdin, stdin_encoding, ...rest } = start;
      input = execInput(rest);
      if (stdin !== undefined) this.pushStdin(decodeText(stdin, stdin_encoding, 'stdin'));
      input.stdin = this.stdin;
      input.controls = this.controls;
      if (tty) input.tty = { cols: cols ?? DEFAULT_TERMINAL.cols, rows: rows ?? DEFAULT_TERMINAL.rows };
    } catch (err) {
      return this.fail(err);
    }
    let items: AsyncIterable<ExecItem>;
    try {
      // Lookups, ownership and limits fail here, before anything runs.
      items = await this.start(input, this.ac.signal);
    } catch (err) {
      return this.fail(err);
    }
    if (this.closed) return;
    let exit: ExitMessage | undefined;
    const encoders = { stdout: new OutputEncoder(start.binary === true), stderr: new OutputEncoder(start.binary === true) };
    const output = (type: 'stdout' | 'stderr', out: EncodedOutput | undefined) =>
      out ? this.send(out.encoding ? { type, data: out.data, encoding: out.encoding } : { type, data: out.data }) : undefined;
    const flush = async () => {
      for (const type of ['stdout', 'stderr'] as const) await output(type, encoders[type].end());
    };
    try {
      for await (const item of items) {
        if (this.closed) return;
        if (item.stream === 'exit') {
          exit = { type: 'exit', exit_code: item.exit_code, duration: formatDuration(item.duration_ms) };
          if (item.timed_out) exit.timed_out = true;
          break;
        }
        await output(item.stream, encoders[item.stream].write(item.data));
      }
      if (!exit) throw new SbxError('provider_error', 'exec ended without an exit status');
    } catch (err) {
      if (this.closed) return;
      await flush();
      return this.fail(err);
    }
    await flush();
    await this.send(exit);
    this.finish();
  }

  /** Sends one message; resolves once the socket took it (flow control for fast output). */
  private send(msg: ExecWsServerMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.readyState !== this.socket.OPEN) return resolve();
      this.socket.send(JSON.stringify(msg), () => resolve());
    });
  }

  /** Reports the error as the last message and closes. */
  private async fail(err: unknown): Promise<void> {
    if (this.closed) return;
    const code = isSbxError(err) ? err.code : 'internal';
    const message = isSbxError(err) ? err.message : 'internal server error';
    if (!isSbxError(err)) this.onInternalError(err);
    await this.send({ type: 'error', code, message });
    this.finish();
  }

  private finish(): void {
    const closing = this.socket.readyState === this.socket.OPEN;
    this.shutdown();
    if (closing) this.socket.close(1000);
  }
}
