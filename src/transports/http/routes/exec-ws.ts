import { Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ErrorBody } from '../../../contracts/common.js';
import {
  ExecWsResize,
  ExecWsSignal,
  ExecWsStart,
  ExecWsStdin,
  ExecWsStdinEof,
  type ExecWsServerMessage,
  type ExecWsStart as StartMessage,
} from '../../../contracts/exec.js';
import { AsyncQueue } from '../../../core/async-queue.js';
import { formatDuration } from '../../../core/duration.js';
import { badRequest, isSbxError, SbxError } from '../../../core/errors.js';
import { EXEC_SIGNALS, type ExecControl, type ExecSignal } from '../../../core/ports.js';
import type { ExecInput, ExecItem } from '../../../core/sandboxes/exec.js';
import { callerOf } from '../caller.js';
import { decodeText, OutputEncoder, type EncodedOutput } from '../encoding.js';
import type { HttpDeps } from '../deps.js';
import { sendError } from '../errors.js';
import { execInput } from './exec.js';

export const EXEC_WS_PATH = '/api/v1/sandboxes/:id/exec/ws';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });

/** Pause reading the socket above this many stdin bytes waiting for the command; resume below the low mark. */
const STDIN_HIGH_WATER = 1024 * 1024;
const STDIN_LOW_WATER = 256 * 1024;
/** Ping interval; a client that misses a whole interval is gone and its command is killed. */
const PING_EVERY_MS = 30_000;
const DEFAULT_TERMINAL = { cols: 80, rows: 24 };

const DESCRIPTION = [
  'Upgrade to a WebSocket (JSON text frames). Client messages: `{type:"start", command, args, env, workdir, timeout, mode, tty, cols, rows, binary}`',
  '(first; a plain exec request without `type` is a start), `{type:"stdin", data, encoding?: "utf8"|"base64"}`, `{type:"stdin_eof"}`,',
  '`{type:"resize", cols, rows}`, `{type:"signal", signal}`. Server messages: `{type:"stdout"|"stderr", data}` (with `binary`, output that',
  'is not valid UTF-8 comes as `{type, data: <base64>, encoding:"base64"}`: an sbx extension for byte-exact output), then',
  '`{type:"exit", exit_code, duration, timed_out?}` or `{type:"error", code, message}`, after which the server closes the socket.',
  'Limits, ownership, events and console capture are those of the HTTP exec; closing the socket kills the command.',
].join(' ');

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

/**
 * The WebSocket exec (DESIGN.md §3 "WebSocket exec"): the same ExecService as the HTTP exec, with
 * stdin, resizes and signals as live streams into the provider. Auth, rate limits and the id
 * check run on the upgrade request (a refusal is a plain HTTP answer); everything after the
 * upgrade is reported in messages.
 */
export function execWsRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.route<{ Params: { id: string } }>({
    method: 'GET',
    url: EXEC_WS_PATH,
    schema: {
      tags: ['exec'],
      summary: 'Run a command over a WebSocket: live stdin, terminal, resize, signals',
      description: DESCRIPTION,
      params: IdParams,
      response: {
        101: { description: 'Switching Protocols: the exec session runs over the WebSocket (messages above)' },
        400: ErrorBody,
        426: ErrorBody,
        429: ErrorBody,
      },
    },
    // A plain GET (no Upgrade header).
    handler: async (_request, reply) => {
      reply.header('Upgrade', 'websocket');
      reply.header('Connection', 'Upgrade');
      return sendError(reply, 426, 'bad_request', 'this endpoint is a WebSocket: send an Upgrade: websocket request');
    },
    wsHandler: (socket: WebSocket, request: FastifyRequest) => {
      new ExecSession(socket, request as FastifyRequest<{ Params: { id: string } }>, deps).open();
    },
  });
}

type State = 'waiting' | 'running' | 'closed';
type ExitMessage = { type: 'exit'; exit_code: number; duration?: string; timed_out?: boolean };

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
    private readonly request: FastifyRequest<{ Params: { id: string } }>,
    private readonly deps: HttpDeps,
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
      const caller = callerOf(this.request);
      // Lookups, ownership and limits fail here, before anything runs.
      items = await this.deps.exec.start(this.request.params.id, input, caller, this.ac.signal);
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
    if (!isSbxError(err)) this.request.log.error({ err }, 'websocket exec failed');
    await this.send({ type: 'error', code, message });
    this.finish();
  }

  private finish(): void {
    const closing = this.socket.readyState === this.socket.OPEN;
    this.shutdown();
    if (closing) this.socket.close(1000);
  }
}
