import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { ExecRequest, ExecResult, type ExecRequest as ExecBody } from '../../../contracts/exec.js';
import { EXEC_BINARY_MEDIA_TYPE } from '../../../contracts/exec-frames.js';
import { SbxError } from '../../../core/errors.js';
import type { BufferedExecResult, ExecItem } from '../../../core/sandboxes/exec.js';
import { outputBudget } from '../output-budget.js';
import { callerOf } from '../caller.js';
import { encodeOutput } from '../../shared/encoding.js';
import { execCommand, execFrames } from '../../shared/exec-framing.js';
import type { HttpDeps } from '../deps.js';
import { abortOnClose } from '../../shared/request-signal.js';
import { binaryExecFrames, wantsBinaryStream } from '../exec-binary.js';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });

/** Spec 4.1 exec: buffered result, or NDJSON chunks when `stream` is true (DESIGN.md §3 "Exec"). */
export function execRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.post<{ Params: { id: string }; Body: ExecBody }>(
    '/api/v1/sandboxes/:id/exec',
    {
      schema: {
        tags: ['exec'],
        summary: 'Run a command (buffered, or a stream when stream=true: NDJSON, or binary frames with Accept: application/octet-stream)',
        params: IdParams,
        body: ExecRequest,
        response: { 200: ExecResult, 400: ErrorBody, 404: ErrorBody, 408: ErrorBody, 429: ErrorBody, 500: ErrorBody, 503: ErrorBody },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const input = execCommand(request.body);
      const signal = abortOnClose(reply);
      const binary = request.body.binary === true;
      if (!request.body.stream) {
        // The output it collects counts against the in-flight budget until the answer is sent.
        const result = await deps.exec.run(request.params.id, input, caller, signal, outputBudget(reply.raw, deps.inflight));
        const body = bufferedBody(result, binary);
        // DESIGN.md §3: 408 whose body adds what ran until the deadline.
        if (result.timed_out) throw new SbxError('timeout', `command timed out after ${body.duration}`, { ...body });
        return body;
      }
      // Limits and lookups fail here, before the stream starts, with their normal status.
      // A command that fails at once (a worker that cannot be reached) answers with its status too.
      const items = await failFast(await deps.exec.start(request.params.id, input, caller, signal), FAIL_FAST_MS);
      const exitRecord = request.body.exit_record === true;
      const frames = wantsBinaryStream(request.headers.accept);
      reply.header('Content-Type', frames ? EXEC_BINARY_MEDIA_TYPE : 'application/x-ndjson; charset=utf-8');
      reply.header('Cache-Control', 'no-store');
      reply.header('X-Accel-Buffering', 'no');
      // A read-ahead of a few chunks lets the engine's next output arrive while the last goes out.
      const body = frames ? binaryExecFrames(items) : ndjson(items, exitRecord, binary);
      return reply.send(Readable.from(body, { objectMode: false, highWaterMark: 256 * 1024 }));
    },
  );
}

/** How long a stream waits for its first item before its headers go out. */
const FAIL_FAST_MS = 1000;

/**
 * Waits up to `ms` for the first item: a failure by then is thrown here, before the headers, so it
 * gets its own status and body; a first item is replayed. A command quiet for longer streams on.
 */
async function failFast<T>(items: AsyncIterable<T>, ms: number): Promise<AsyncIterable<T>> {
  const it = items[Symbol.asyncIterator]();
  const first = it.next();
  let timer: NodeJS.Timeout | undefined;
  const quiet = new Promise<'quiet'>((resolve) => (timer = setTimeout(() => resolve('quiet'), ms)));
  try {
    const early = await Promise.race([first, quiet]);
    if (early === 'quiet') first.catch(() => undefined); // the stream reports it in its tail
  } finally {
    clearTimeout(timer);
  }
  return {
    [Symbol.asyncIterator]() {
      let pending: Promise<IteratorResult<T>> | null = first;
      return {
        next() {
          const p = pending ?? it.next();
          pending = null;
          return p;
        },
        return() {
          pending = null;
          return it.return ? it.return() : Promise.resolve({ done: true as const, value: undefined });
        },
      };
    },
  };
}

/** The buffered result body; with `binary`, a stream that is not valid UTF-8 goes base64 and says so. */
function bufferedBody(r: BufferedExecResult, binary: boolean): ExecResult {
  const stdout = encodeOutput(r.stdout, binary);
  const stderr = encodeOutput(r.stderr, binary);
  const body: ExecResult = { exit_code: r.exit_code, stdout: stdout.data, stderr: stderr.data, duration: r.duration };
  if (r.truncated) body.truncated = true;
  if (stdout.encoding) body.stdout_encoding = stdout.encoding;
  if (stderr.encoding) body.stderr_encoding = stderr.encoding;
  return body;
}

/** The API's NDJSON writer of the shared frames: output lines, the optional exit record, the error tail. */
async function* ndjson(items: AsyncIterable<ExecItem>, exitRecord: boolean, binary: boolean): AsyncGenerator<string> {
  for await (const f of execFrames(items, binary ? 'binary' : 'text')) {
    if (f.kind === 'output') {
      yield JSON.stringify(f.encoding ? { stream: f.stream, data: f.data, encoding: f.encoding } : { stream: f.stream, data: f.data }) +
        '\n';
    } else if (f.kind === 'exit') {
      if (exitRecord) {
        const rec: Record<string, unknown> = { stream: 'exit', data: '', exit_code: f.exit_code, duration: f.duration };
        if (f.timed_out) rec.timed_out = true;
        yield JSON.stringify(rec) + '\n';
      }
    } else {
      // Headers are gone: report on stderr, and in the exit record when asked (125 = sbx failed).
      yield JSON.stringify({ stream: 'stderr', data: `sbx: ${f.message}\n` }) + '\n';
      if (exitRecord)
        yield JSON.stringify({ stream: 'exit', data: '', exit_code: 125, error: { code: f.code, message: f.message } }) + '\n';
    }
  }
}
