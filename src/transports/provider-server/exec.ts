/**
 * `POST /exec` of the reference server: buffered (`{exit_code, stdout, stderr}`) or, with `stream:
 * true`, NDJSON written line by line with backpressure, headers first so a silent command never
 * looks like a hung backend. With `exec_id`, live stdin (`stdin_live`) and controls arrive at
 * `/exec/{exec_id}/stdin|control` while it runs. A closed connection aborts the command (the
 * provider kills its process tree). In anchor mode (`anchor`) only what the anchor's contract
 * documents: text output, no exit line, no error line (the stream just ends).
 */
import type { FastifyReply } from 'fastify';
import { NDJSON, type ExecLine, type ExecRequest } from '../../contracts/custom-http.js';
import { AsyncQueue } from '../../core/async-queue.js';
import { isSbxError, SbxError } from '../../core/errors.js';
import type { ExecControl, ExecEvent, ExecSpec, Provider } from '../../core/ports/index.js';

/** Chunks of live stdin a backend holds before it answers the next one (flow control). */
const STDIN_WINDOW = 16;

export interface LiveExec {
  stdin?: AsyncQueue<Uint8Array>;
  controls: AsyncQueue<ExecControl>;
  /** Resolves when the command has taken enough stdin for another chunk. */
  room(): Promise<void>;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
function text(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function line(ev: ExecEvent): ExecLine {
  if (ev.stream === 'exit') return { stream: 'exit', exit_code: ev.exit_code };
  const t = text(ev.data);
  return t !== undefined
    ? { stream: ev.stream, data: t }
    : { stream: ev.stream, data: Buffer.from(ev.data).toString('base64'), encoding: 'base64' };
}

/** A live exec's queues, registered under its id until it ends. */
function liveExec(withStdin: boolean): LiveExec {
  const waiters: Array<() => void> = [];
  const wake = () => {
    while (waiters.length > 0 && (stdin?.length ?? 0) < STDIN_WINDOW) waiters.shift()!();
  };
  const stdin = withStdin ? new AsyncQueue<Uint8Array>({ onShift: () => queueMicrotask(wake) }) : undefined;
  return {
    stdin,
    controls: new AsyncQueue<ExecControl>(),
    room: () =>
      (stdin?.length ?? 0) < STDIN_WINDOW || stdin?.isClosed || stdin?.isEnded
        ? Promise.resolve()
        : new Promise<void>((r) => waiters.push(r)),
  };
}

export async function handleExec(
  provider: Provider,
  live: Map<string, LiveExec>,
  body: ExecRequest,
  reply: FastifyReply,
  sendError: (err: unknown) => unknown,
  anchor = false,
): Promise<unknown> {
  const spec: ExecSpec = { command: body.command, args: body.args ?? [], mode: body.mode ?? 'shell', env: body.env ?? {} };
  if (body.workdir !== undefined) spec.workdir = body.workdir;
  if (body.stdin !== undefined) spec.stdin = Buffer.from(body.stdin, 'base64');
  if (body.stdin_live && body.exec_id === undefined) throw new SbxError('bad_request', 'stdin_live needs an exec_id');
  if (body.exec_id !== undefined && live.has(body.exec_id)) throw new SbxError('conflict', 'an exec with this exec_id is running');
  if ((await provider.status(body.sandbox_id)) === 'missing') throw new SbxError('not_found', 'no such sandbox');

  const ac = new AbortController();
  let ended = false;
  reply.raw.once('close', () => ended || ac.abort(new Error('the caller went away')));
  let entry: LiveExec | undefined;
  if (body.exec_id !== undefined) {
    entry = liveExec(body.stdin_live === true);
    if (entry.stdin) spec.stdin = entry.stdin;
    spec.controls = entry.controls;
    live.set(body.exec_id, entry);
  }
  const forget = () => {
    if (body.exec_id !== undefined) live.delete(body.exec_id);
    entry?.controls.end();
  };

  if (!body.stream) {
    try {
      const out: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
      let exitCode = -1;
      for await (const ev of provider.exec(body.sandbox_id, spec, ac.signal)) {
        if (ev.stream === 'exit') exitCode = ev.exit_code;
        else out[ev.stream].push(Buffer.from(ev.data));
      }
      ended = true;
      const stdout = Buffer.concat(out.stdout);
      const stderr = Buffer.concat(out.stderr);
      const [so, se] = [text(stdout), text(stderr)];
      if (anchor) return reply.send({ exit_code: exitCode, stdout: stdout.toString('utf8'), stderr: stderr.toString('utf8') });
      if (so !== undefined && se !== undefined) return reply.send({ exit_code: exitCode, stdout: so, stderr: se });
      return reply.send({ exit_code: exitCode, stdout: stdout.toString('base64'), stderr: stderr.toString('base64'), encoding: 'base64' });
    } finally {
      ended = true;
      forget();
    }
  }

  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': NDJSON, 'cache-control': 'no-store' });
  raw.flushHeaders();
  const write = async (l: unknown) => {
    if (raw.destroyed) return;
    if (!raw.write(`${JSON.stringify(l)}\n`)) {
      await new Promise<void>((resolve) => {
        const done = () => (raw.off('drain', done), raw.off('close', done), resolve());
        raw.once('drain', done);
        raw.once('close', done);
      });
    }
  };
  try {
    // The exit line goes out once the provider's iteration has ended, so what it does last (its
    // console keeps a trailing partial line) is done before the caller learns the command ended.
    let exit: ExecEvent | undefined;
    for await (const ev of provider.exec(body.sandbox_id, spec, ac.signal)) {
      if (ac.signal.aborted) break;
      if (ev.stream === 'exit') exit = ev;
      else await write(anchor ? { stream: ev.stream, data: Buffer.from(ev.data).toString('utf8') } : line(ev));
    }
    if (exit && !ac.signal.aborted && !anchor) await write(line(exit));
  } catch (err) {
    if (!ac.signal.aborted && !anchor) {
      const code = isSbxError(err) ? err.code : 'provider_error';
      if (!isSbxError(err)) sendError(err);
      await write({ stream: 'error', code, message: isSbxError(err) ? err.message : 'the provider failed' });
    }
  } finally {
    ended = true;
    forget();
    raw.end();
  }
  return undefined;
}
