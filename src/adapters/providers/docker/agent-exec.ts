import { randomBytes } from 'node:crypto';
import { badRequest } from '../../../core/errors.js';
import type { ExecControl, ExecEvent, ExecSignal, ExecSpec } from '../../../core/ports/index.js';
import { isLiveStdin } from '../shared/live-input.js';
import { AgentUnavailable, agentGone, cString, E, type Frame, MAX_QUEUED, u32 } from './agent.js';
import { type AgentConnection, Inbox, MAX_CHUNK, R, STAGE, T } from './agent-conn.js';
import { deniedText, execArgv, notFoundText } from './exec.js';
import { WORKDIR } from './options.js';

const MARKER = 'SBX_EXEC_ID';
/** Unacknowledged stdin bytes to one command; the agent acknowledges what the command took. */
const STDIN_WINDOW = 4 * MAX_CHUNK;
const SIGNALS: Record<ExecSignal, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15 };
/** Most output bytes merged into one chunk (the agent sends its pipes' output 64 KiB at a time). */
const MERGE_MAX = 1024 * 1024;

/** True when the agent can run this exec as the engine would (same user, no terminal). */
export function agentCanExec(conn: AgentConnection, spec: ExecSpec): boolean {
  if (spec.tty) return false;
  if (spec.user && (spec.user.uid !== conn.hello.uid || spec.user.gid !== conn.hello.gid)) return false;
  return true;
}

/**
 * `first`'s payload joined with the output frames of the same stream already queued behind it (up
 * to MERGE_MAX): a busy stream travels in fewer, bigger chunks through every layer above (one
 * frame, one socket write, one credit each) while a quiet one goes out at once, as it came.
 */
function mergeQueued(inbox: Inbox<Frame>, first: { type: number; payload: Buffer }): Buffer {
  let parts: Buffer[] | undefined;
  let size = first.payload.byteLength;
  for (let next = inbox.peek(); next && !('lost' in next) && next.type === first.type; next = inbox.peek()) {
    if (size + next.payload.byteLength > MERGE_MAX) break;
    inbox.take();
    (parts ??= [first.payload]).push(next.payload);
    size += next.payload.byteLength;
  }
  return parts ? Buffer.concat(parts, size) : first.payload;
}

/** One exec's channel on the agent connection: its frames queued, its stdin sent within the acknowledged window. */
class ExecChannel {
  readonly inbox = new Inbox<Frame>();
  readonly id: number;
  /** Set when the exec ends: stdin and controls stop feeding. */
  stopped = false;
  private acked = 0;
  private sent = 0;
  private wake: (() => void) | undefined;

  constructor(private readonly conn: AgentConnection) {
    this.id = conn.open({
      frame: (type, payload) => {
        if (type === R.STDIN_ACK) {
          this.acked += payload.readUInt32LE(0);
          this.wakeUp();
          return;
        }
        this.inbox.push({ type, payload });
        if (this.inbox.bytes > MAX_QUEUED) conn.close();
      },
      lost: () => {
        this.inbox.push({ lost: true });
        this.wakeUp();
      },
    });
  }

  get alive(): boolean {
    return this.conn.alive;
  }

  get open(): boolean {
    return this.conn.alive && !this.stopped;
  }

  send(type: number, ...parts: Uint8Array[]): boolean {
    return this.conn.send(this.id, type, ...parts);
  }

  /** Stdin in chunks, never more than the window ahead of what the command took. */
  async feed(chunk: Uint8Array): Promise<void> {
    for (let at = 0; at < chunk.byteLength && this.open; at += MAX_CHUNK) {
      while (this.sent - this.acked > STDIN_WINDOW && this.open) await new Promise<void>((r) => (this.wake = r));
      const part = chunk.subarray(at, at + MAX_CHUNK);
      this.sent += part.byteLength;
      if (!this.send(T.STDIN, part)) await this.conn.drained();
    }
  }

  stop(): void {
    this.stopped = true;
    this.wakeUp();
  }

  private wakeUp(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}

/** The EXEC frame's parts: stdin flag, counts, workdir, argv, environment (with the marker that finds the tree later). */
function execFrame(spec: ExecSpec, withStdin: boolean): { parts: Buffer[]; argv: string[]; marker: string; workdir: string } {
  const argv = execArgv(spec);
  const marker = `${MARKER}=${randomBytes(12).toString('hex')}`;
  const env = [...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), marker];
  const workdir = spec.workdir ?? WORKDIR;
  const head = Buffer.alloc(12);
  head.writeUInt32LE(withStdin ? 1 : 0, 0);
  head.writeUInt32LE(argv.length, 4);
  head.writeUInt32LE(env.length, 8);
  return { parts: [head, cString(workdir), ...argv.map(cString), ...env.map(cString)], argv, marker, workdir };
}

/** A command that could not start, as the engine path reports it: sbx's text on stderr, 127 or 126; or thrown. */
function refusedStart(payload: Buffer, workdir: string, name: string): ExecEvent[] {
  const stage = payload.readUInt32LE(0);
  const errno = payload.readUInt32LE(4);
  if (stage === STAGE.CHDIR) throw badRequest(`workdir ${workdir} is not an existing directory in the sandbox`);
  if (stage !== STAGE.EXEC) throw new AgentUnavailable();
  const text =
    errno === E.ENOENT
      ? notFoundText(name)
      : errno === E.EACCES || errno === E.EISDIR
        ? deniedText(name)
        : `sbx: cannot execute: ${name}\n`;
  return [
    { stream: 'stderr', data: Buffer.from(text) },
    { stream: 'exit', exit_code: errno === E.ENOENT ? 127 : 126 },
  ];
}

/** The pumps of a started command: live stdin or its bytes then EOF, and signals from the controls. */
function startInputs(ch: ExecChannel, spec: ExecSpec): { pumps: Array<Promise<void>>; liveIt?: AsyncIterator<Uint8Array> } {
  const pumps: Array<Promise<void>> = [];
  let liveIt: AsyncIterator<Uint8Array> | undefined;
  if (isLiveStdin(spec.stdin)) {
    const it = (spec.stdin as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    liveIt = it;
    pumps.push(
      (async () => {
        try {
          for (;;) {
            const r = await it.next();
            if (r.done || !ch.open) break;
            await ch.feed(r.value);
          }
          ch.send(T.EOF);
        } catch {
          ch.send(T.EOF);
        }
      })(),
    );
  } else if (spec.stdin !== undefined && (spec.stdin as Uint8Array).byteLength > 0) {
    pumps.push(ch.feed(spec.stdin as Uint8Array).then(() => void ch.send(T.EOF)));
  }
  if (spec.controls) {
    const controls = spec.controls;
    pumps.push(
      (async () => {
        try {
          for await (const c of controls as AsyncIterable<ExecControl>) {
            if (!ch.open) break;
            if (c.type === 'signal') ch.send(T.SIGNAL, u32(SIGNALS[c.signal]));
          }
        } catch {
          // A controls stream that fails ends the controls, not the command.
        }
      })(),
    );
  }
  return { pumps, liveIt };
}

/**
 * One command through the agent, with the engine path's semantics: sbx's own texts for a command
 * that cannot start (127/126), a workdir error, stdin then EOF or live, signals to the whole tree,
 * output pulled with credit (a slow consumer slows the command), exit code last. An abort or an
 * early stop kills the tree. Throws AgentUnavailable when the agent could not even take it.
 */
export async function* agentExec(
  conn: AgentConnection,
  spec: ExecSpec,
  signal: AbortSignal,
  onOutput?: (stream: 'stdout' | 'stderr', data: Uint8Array) => void,
  onLost?: (marker: string) => Promise<void>,
): AsyncGenerator<ExecEvent> {
  if (signal.aborted) return;
  const ch = new ExecChannel(conn);
  const live = isLiveStdin(spec.stdin);
  const withStdin = live || (spec.stdin !== undefined && (spec.stdin as Uint8Array).byteLength > 0);
  const frame = execFrame(spec, withStdin);
  const state = { finished: false };
  try {
    if (!conn.alive || !ch.send(T.EXEC, ...frame.parts)) {
      if (!conn.alive) throw new AgentUnavailable();
    }
    const first = await ch.inbox.next();
    if (!first || 'lost' in first) throw new AgentUnavailable();
    if (first.type === R.ERROR) {
      state.finished = true;
      for (const ev of refusedStart(first.payload, frame.workdir, frame.argv[0]!)) {
        if (ev.stream === 'stderr') onOutput?.('stderr', ev.data);
        yield ev;
      }
      return;
    }
    if (first.type !== R.STARTED) throw new AgentUnavailable();
    // From here the command runs: losing the agent is an error of this exec, never a second run.
    yield* runStarted(ch, spec, signal, { marker: frame.marker, state, onOutput, onLost });
  } finally {
    ch.stop();
    // The consumer stopped early, or the run failed: nothing of the command may keep running.
    if (!state.finished) ch.send(T.CANCEL);
    conn.release(ch.id);
  }
}

/** A started command: its inputs pumped, its output yielded with credit, its exit last; an abort kills the tree. */
async function* runStarted(
  ch: ExecChannel,
  spec: ExecSpec,
  signal: AbortSignal,
  run: {
    marker: string;
    state: { finished: boolean };
    onOutput?: (stream: 'stdout' | 'stderr', data: Uint8Array) => void;
    onLost?: (marker: string) => Promise<void>;
  },
): AsyncGenerator<ExecEvent> {
  const { marker, state, onOutput, onLost } = run;
  let grace: NodeJS.Timeout | undefined;
  const onAbort = () => {
    ch.send(T.SIGNAL, u32(SIGNALS.SIGKILL));
    // The tree is killed; its output ends by itself, or is cut after a grace.
    grace = setTimeout(() => ch.inbox.push({ lost: true }), 1_000);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) onAbort();
  const { pumps, liveIt } = startInputs(ch, spec);
  try {
    for (;;) {
      const f = await ch.inbox.next();
      if (!f) continue;
      if ('lost' in f) {
        // The command outlives its agent: the engine kills what is left of it, then this exec fails.
        if (!ch.alive) await onLost?.(marker);
        if (signal.aborted) return;
        throw agentGone('exec');
      }
      if (f.type === R.STDOUT || f.type === R.STDERR) {
        if (signal.aborted) continue;
        const stream = f.type === R.STDOUT ? 'stdout' : 'stderr';
        const data = mergeQueued(ch.inbox, f);
        onOutput?.(stream, data);
        yield { stream, data };
        // Credit after the consumer took the chunk: a slow consumer holds the command's output back.
        ch.send(T.CREDIT, u32(data.byteLength));
      } else if (f.type === R.EXIT) {
        state.finished = true;
        if (signal.aborted) return;
        yield { stream: 'exit', exit_code: f.payload.readInt32LE(0) };
        return;
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    clearTimeout(grace);
    ch.stop();
    void liveIt?.return?.()?.catch(() => undefined);
    void Promise.allSettled(pumps);
  }
}
