/**
 * The WebSocket side of an exec session (DESIGN.md §3 "WebSocket exec"): JSON text frames parsed
 * and validated into the messages of core's InteractiveExec (the state machine), its output framed back
 * (UTF-8 text, or base64 with `binary`), stdin backpressure as socket pause/resume, and a ping
 * keep-alive. Shared by the API's `/api/v1/sandboxes/{id}/exec/ws` and a worker's `/rpc/exec/ws`:
 * each gives the socket and how to start the command.
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
} from '../../contracts/exec.js';
import { badRequest } from '../../core/errors.js';
import { EXEC_SIGNALS, type ExecSignal } from '../../core/ports/index.js';
import type { ExecCommand } from '../../core/sandboxes/exec.js';
import { InteractiveExec, type ExecStarter, type SessionMessage } from '../../core/sandboxes/exec-session.js';
import { execCommand, ExecFramer, type ExecFrame } from './exec-framing.js';
import { decodeText } from './encoding.js';

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
  if (!(EXEC_SIGNALS as readonly string[]).includes(full))
    throw badRequest(`unsupported signal ${JSON.stringify(name)} (use one of ${EXEC_SIGNALS.join(', ')})`);
  return full as ExecSignal;
}

export type { ExecStarter } from '../../core/sandboxes/exec-session.js';

/** Options of one socket session. */
export interface ExecSocketOptions {
  /** Hears of failures that are not SbxErrors (bugs), to log them; the client only sees `internal`. */
  onInternalError?(err: unknown): void;
  /** Ping interval (default 30 s); a client that answers no ping for a whole interval is cut off. */
  pingEveryMs?: number;
}

/** A frame as its WebSocket server message. */
function wsMessage(f: ExecFrame): ExecWsServerMessage {
  if (f.kind === 'output') return f.encoding ? { type: f.stream, data: f.data, encoding: f.encoding } : { type: f.stream, data: f.data };
  if (f.kind === 'exit')
    return f.timed_out
      ? { type: 'exit', exit_code: f.exit_code, duration: f.duration, timed_out: true }
      : { type: 'exit', exit_code: f.exit_code, duration: f.duration };
  return { type: 'error', code: f.code, message: f.message };
}

/**
 * Serves one WebSocket exec session on an upgraded socket: frames in → session messages, the
 * session's output → frames out.
 */
export function serveExecSocket(socket: WebSocket, start: ExecStarter, opts: ExecSocketOptions = {}): void {
  let framer = new ExecFramer('text');
  const send = (msg: ExecWsServerMessage) =>
    new Promise<void>((resolve) => {
      if (socket.readyState !== socket.OPEN) return resolve();
      socket.send(JSON.stringify(msg), () => resolve());
    });
  // Each message waits for the socket to take the last one: a slow client slows the command.
  const sendFrames = async (frames: ExecFrame[]) => {
    for (const f of frames) await send(wsMessage(f));
  };
  const session = new InteractiveExec(
    start,
    {
      output: (stream, data) => sendFrames(framer.output(stream, data)),
      exit: (e) => sendFrames(framer.exit({ stream: 'exit', ...e })),
      error: (code, message) => sendFrames([...framer.flush(), { kind: 'error', code, message }]),
      close: () => {
        if (socket.readyState === socket.OPEN) socket.close(1000);
      },
      pause: () => socket.pause(),
      resume: () => socket.resume(),
    },
    { highWater: STDIN_HIGH_WATER, lowWater: STDIN_LOW_WATER, onInternalError: opts.onInternalError },
  );

  let alive = true;
  const pinger = setInterval(() => {
    if (!alive) {
      socket.terminate();
      return;
    }
    alive = false;
    socket.ping();
  }, opts.pingEveryMs ?? PING_EVERY_MS);
  pinger.unref();
  const gone = () => {
    clearInterval(pinger);
    session.clientGone();
  };
  socket.on('close', gone);
  socket.on('error', gone);
  socket.on('pong', () => (alive = true));
  socket.on('message', (data, isBinary) => {
    if (session.state === 'closed') return;
    try {
      const { msg, binary } = parseFrame(data as Buffer | Buffer[] | ArrayBuffer, isBinary, session.state === 'waiting');
      if (msg.type === 'start' && session.state === 'waiting') framer = new ExecFramer(binary ? 'binary' : 'text');
      session.receive(msg);
    } catch (err) {
      session.reject(err);
    }
  });
}

/** One text frame → a validated session message, and for a start whether output may go base64. */
function parseFrame(raw: Buffer | Buffer[] | ArrayBuffer, isBinary: boolean, waiting: boolean): { msg: SessionMessage; binary?: boolean } {
  if (isBinary) throw badRequest('binary frames are not supported: send JSON text messages');
  const text = Buffer.isBuffer(raw)
    ? raw.toString('utf8')
    : Array.isArray(raw)
      ? Buffer.concat(raw).toString('utf8')
      : Buffer.from(raw).toString('utf8');
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch (err) {
    throw badRequest(`malformed JSON message: ${(err as Error).message}`);
  }
  if (!msg || typeof msg !== 'object' || Array.isArray(msg)) throw badRequest('a message must be a JSON object');
  const type = (msg as { type?: unknown }).type;
  // A first message shaped like the exec request (no `type`) is a start.
  if (type === 'start' || (type === undefined && waiting)) {
    // A second start is the session's to refuse, whatever its shape.
    if (!waiting) return { msg: { type: 'start', input: { command: '' } } };
    const start = validated<StartMessage>('start', msg);
    const input: ExecCommand = execCommand(start);
    if (start.tty) input.tty = { cols: start.cols ?? DEFAULT_TERMINAL.cols, rows: start.rows ?? DEFAULT_TERMINAL.rows };
    return { msg: { type: 'start', input }, binary: start.binary === true };
  }
  switch (type) {
    case 'stdin': {
      const m = validated<{ data: string; encoding?: 'utf8' | 'base64' }>('stdin', msg);
      return { msg: { type: 'stdin', data: decodeText(m.data, m.encoding, 'stdin data') } };
    }
    case 'stdin_eof':
      validated('stdin_eof', msg);
      return { msg: { type: 'stdin_eof' } };
    case 'resize': {
      const m = validated<{ cols: number; rows: number }>('resize', msg);
      return { msg: { type: 'control', control: { type: 'resize', cols: m.cols, rows: m.rows } } };
    }
    case 'signal': {
      const m = validated<{ signal: string }>('signal', msg);
      return { msg: { type: 'control', control: { type: 'signal', signal: execSignal(m.signal) } } };
    }
    default:
      return { msg: { type: 'unknown', name: typeof type === 'string' ? type : JSON.stringify(type) } };
  }
}
