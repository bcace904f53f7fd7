/**
 * Exec over the custom HTTP contract (DESIGN §12). Buffered (core collects the whole output): one
 * `POST /exec` without `stream`, answered `{exit_code, stdout, stderr}`. Streamed: `POST /exec`
 * with `stream: true`, its NDJSON answer parsed
 * line by line as bytes arrive (never the whole body). Live stdin and controls go to
 * `/exec/{exec_id}/stdin` and `/exec/{exec_id}/control` once the answer's headers are in (the
 * backend has registered the exec by then). Ending the iteration early or aborting the signal
 * closes the call, which tells the backend to kill the command; the iteration then ends quietly.
 * The exit code comes from a final `{stream: "exit", exit_code}` line when the backend sends one
 * (sbx's reference server does); a backend written for the anchor sends none, and the iteration
 * then ends without an exit (the exit code is null all the way out).
 */
import { randomBytes } from 'node:crypto';
import { ExecLine, ExecResponse, NDJSON, STATUS_CODES, type ExecRequest } from '../../../contracts/custom-http.js';
import { SbxError, type ErrorCode } from '../../../core/errors.js';
import type { ExecControl, ExecEvent, ExecSpec } from '../../../core/ports/index.js';
import type { HttpCaller } from './http.js';

/** Longest NDJSON line accepted (one chunk of output, maybe base64). */
const MAX_LINE = 16 * 1024 * 1024;
/** Largest buffered exec answer accepted. */
const MAX_BUFFERED = 256 * 1024 * 1024;

function requestBody(runtimeId: string, spec: ExecSpec): ExecRequest {
  const body: ExecRequest = { sandbox_id: runtimeId, command: spec.command, args: spec.args, mode: spec.mode, env: spec.env, stream: true };
  if (spec.workdir !== undefined) body.workdir = spec.workdir;
  return body;
}

/** Feeds an iterable to a backend route one item at a time, in order, until it ends or `stopped()`. */
async function pump<T>(
  iter: AsyncIterator<T>,
  stopped: () => boolean,
  send: (item: T) => Promise<unknown>,
  end?: () => Promise<unknown>,
): Promise<void> {
  try {
    for (;;) {
      const r = await iter.next();
      if (stopped()) return;
      if (r.done) {
        await end?.();
        return;
      }
      await send(r.value);
    }
  } catch {
    // The exec's own stream reports what went wrong; a refused chunk ends the pump.
  }
}

/** `live`: the backend announced `exec_stdin` (the `/exec/{exec_id}/…` routes). */
export async function* execOverHttp(
  http: HttpCaller,
  runtimeId: string,
  spec: ExecSpec,
  signal: AbortSignal,
  live: boolean,
): AsyncGenerator<ExecEvent> {
  if (signal.aborted) return;
  const liveStdin0 = spec.stdin !== undefined && !(spec.stdin instanceof Uint8Array);
  if (spec.buffered && !liveStdin0 && !spec.controls) {
    yield* execBuffered(http, runtimeId, spec, signal);
    return;
  }
  const body = requestBody(runtimeId, spec);
  const liveStdin = spec.stdin !== undefined && !(spec.stdin instanceof Uint8Array) ? spec.stdin : undefined;
  if ((liveStdin || spec.controls) && !live)
    throw http.error('not_implemented', 'exec', 'this backend does not announce exec_stdin: no live stdin or signals');
  if (spec.stdin instanceof Uint8Array && spec.stdin.byteLength > 0) body.stdin = Buffer.from(spec.stdin).toString('base64');
  const execId = liveStdin || spec.controls ? randomBytes(12).toString('hex') : undefined;
  if (execId) body.exec_id = execId;
  if (liveStdin) body.stdin_live = true;

  const ac = new AbortController();
  const onAbort = () => ac.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  let finished = false;
  const iters: AsyncIterator<unknown>[] = [];
  try {
    let answer;
    try {
      answer = await http.call({
        method: 'POST',
        path: '/exec',
        json: body,
        signal: ac.signal,
        what: 'exec',
        bodyTimeoutMs: 0,
        wholeDeadline: false,
        accept: NDJSON,
      });
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    if (execId) {
      const stopped = () => finished || ac.signal.aborted;
      const route = (tail: string) => `/exec/${execId}/${tail}`;
      if (liveStdin) {
        const it = liveStdin[Symbol.asyncIterator]();
        iters.push(it);
        void pump(
          it,
          stopped,
          (chunk) => http.send({ method: 'POST', path: route('stdin'), body: chunk, signal: ac.signal, what: 'exec stdin' }),
          () =>
            http.send({
              method: 'POST',
              path: route('stdin'),
              query: { eof: 1 },
              body: new Uint8Array(0),
              signal: ac.signal,
              what: 'exec stdin',
            }),
        );
      }
      if (spec.controls) {
        const it = spec.controls[Symbol.asyncIterator]();
        iters.push(it);
        void pump<ExecControl>(it, stopped, (control) =>
          http.send({ method: 'POST', path: route('control'), json: control, signal: ac.signal, what: 'exec control' }),
        );
      }
    }

    let pending: Buffer[] = [];
    let pendingLen = 0;
    try {
      for await (const raw of answer.body) {
        let chunk = raw as Buffer;
        let nl: number;
        while ((nl = chunk.indexOf(10)) >= 0) {
          const line = pendingLen > 0 ? Buffer.concat([...pending, chunk.subarray(0, nl)]) : chunk.subarray(0, nl);
          pending = [];
          pendingLen = 0;
          chunk = chunk.subarray(nl + 1);
          const ev = parseLine(http, line);
          if (!ev) continue;
          if (ev.stream === 'exit') {
            finished = true;
            yield ev;
            return;
          }
          yield ev;
        }
        if (chunk.length > 0) {
          pendingLen += chunk.length;
          if (pendingLen > MAX_LINE) throw http.error('provider_error', 'exec', 'the backend sent an exec line that is too long');
          pending.push(chunk);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof SbxError) throw err;
      throw http.error('unavailable', 'exec', 'lost the connection to the backend during exec');
    }
    if (signal.aborted) return;
    if (pendingLen > 0) {
      const ev = parseLine(http, Buffer.concat(pending));
      if (ev?.stream === 'exit') {
        finished = true;
        yield ev;
        return;
      }
      if (ev) yield ev;
    }
    // The anchor's contract sends output lines only: the stream's end is the command's end.
    finished = true;
  } finally {
    signal.removeEventListener('abort', onAbort);
    // Not ended by its exit line: close the call, so the backend kills the command.
    if (!finished) ac.abort(new Error('exec ended by the caller'));
    else ac.abort(new Error('exec finished'));
    for (const it of iters) void it.return?.(undefined)?.catch?.(() => undefined);
  }
}

/** One `POST /exec` without `stream`: `{exit_code, stdout, stderr}` (base64 with sbx's `encoding`). */
async function* execBuffered(http: HttpCaller, runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncGenerator<ExecEvent> {
  const body = requestBody(runtimeId, spec);
  delete body.stream;
  if (spec.stdin instanceof Uint8Array && spec.stdin.byteLength > 0) body.stdin = Buffer.from(spec.stdin).toString('base64');
  let answer: ExecResponse;
  try {
    // Up to two outputs at sbx's largest output limit, base64 (the server cuts them to its own limit).
    answer = await http.json(
      { method: 'POST', path: '/exec', json: body, signal, what: 'exec', untimed: true },
      ExecResponse,
      MAX_BUFFERED,
    );
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  }
  const bytes = (s: string) => (answer.encoding === 'base64' ? Buffer.from(s, 'base64') : Buffer.from(s, 'utf8'));
  const stdout = bytes(answer.stdout);
  const stderr = bytes(answer.stderr);
  if (stdout.length > 0) yield { stream: 'stdout', data: stdout };
  if (stderr.length > 0) yield { stream: 'stderr', data: stderr };
  yield { stream: 'exit', exit_code: answer.exit_code };
}

function parseLine(http: HttpCaller, line: Buffer): ExecEvent | undefined {
  const text = line.toString('utf8').trim();
  if (text === '') return undefined;
  const v = http.parse(text, ExecLine, 'exec');
  if (v.stream === 'error') {
    const known = Object.values(STATUS_CODES).includes(v.code) ? (v.code as ErrorCode) : 'provider_error';
    throw http.error(known, 'exec', `the backend reported ${known}`);
  }
  if (v.stream === 'exit') return { stream: 'exit', exit_code: v.exit_code };
  return { stream: v.stream, data: v.encoding === 'base64' ? Buffer.from(v.data, 'base64') : Buffer.from(v.data, 'utf8') };
}
