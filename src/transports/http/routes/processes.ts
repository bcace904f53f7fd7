import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import {
  ProcessInfo,
  ProcessOutputChunk,
  ProcessOutputQuery,
  ProcessSignal,
  ProcessStart,
  ProcessStdin,
  TerminalSize,
} from '../../../contracts/processes.js';
import { SbxError } from '../../../core/errors.js';
import type { ProcessRecord } from '../../../core/ports/index.js';
import type { ProcessOutputItem } from '../../../core/sandboxes/processes.js';
import { execSignal } from '../../shared/exec-socket.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { encodeOutput } from '../../shared/encoding.js';

const SandboxParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const ProcessParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }), pid: Type.String({ minLength: 1, maxLength: 64 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 429: ErrorBody, 500: ErrorBody, 501: ErrorBody, 503: ErrorBody };

export function presentProcess(p: ProcessRecord): ProcessInfo {
  return {
    id: p.id,
    sandbox_id: p.sandbox_id,
    command: p.command,
    args: p.args,
    mode: p.mode,
    state: p.state,
    exit_code: p.exit_code,
    started_at: p.started_at,
    ended_at: p.ended_at,
    runner: p.runner,
    deadline_at: p.deadline_at,
  };
}

/** Background processes (DESIGN.md §10): start, list, get, output by offset (NDJSON), signal, kill. */
export function processRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const service = () => {
    if (!deps.processes) throw new SbxError('not_implemented', 'background processes are not available on this server');
    return deps.processes;
  };
  const base = '/api/v1/sandboxes/:id/processes';

  app.post<{ Params: { id: string }; Body: ProcessStart }>(
    base,
    {
      schema: {
        tags: ['processes'],
        summary: 'Start a background process',
        params: SandboxParams,
        body: ProcessStart,
        response: { 201: ProcessInfo, ...errors },
      },
    },
    async (request, reply) => {
      const b = request.body;
      const rec = await service().start(
        request.params.id,
        { command: b.command, args: b.args, env: b.env, workdir: b.workdir, timeout: b.timeout, mode: b.mode },
        callerOf(request),
        { ...(b.stdin !== undefined ? { stdin: b.stdin } : {}), ...(b.pty !== undefined ? { pty: b.pty } : {}) },
      );
      return reply.code(201).send(presentProcess(rec));
    },
  );

  app.get<{ Params: { id: string } }>(
    base,
    {
      schema: {
        tags: ['processes'],
        summary: "A sandbox's background processes, oldest first",
        params: SandboxParams,
        response: { 200: Type.Array(ProcessInfo), ...errors },
      },
    },
    async (request) => (await service().list(request.params.id, callerOf(request))).map(presentProcess),
  );

  app.get<{ Params: { id: string; pid: string } }>(
    `${base}/:pid`,
    {
      schema: { tags: ['processes'], summary: 'One background process', params: ProcessParams, response: { 200: ProcessInfo, ...errors } },
    },
    async (request) => presentProcess(await service().get(request.params.id, request.params.pid, callerOf(request))),
  );

  app.get<{ Params: { id: string; pid: string }; Querystring: ProcessOutputQuery }>(
    `${base}/:pid/output`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Output from a byte offset as NDJSON ProcessOutputChunk lines; follow=true waits for more until the process ends',
        params: ProcessParams,
        querystring: ProcessOutputQuery,
        response: {
          200: Type.Array(ProcessOutputChunk, { description: 'application/x-ndjson: one ProcessOutputChunk per line' }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const items = await service().output(request.params.id, request.params.pid, callerOf(request), {
        offset: request.query.offset ?? 0,
        follow: request.query.follow === true,
      });
      reply.header('Content-Type', 'application/x-ndjson; charset=utf-8');
      reply.header('Cache-Control', 'no-store');
      reply.header('X-Accel-Buffering', 'no');
      return reply.send(Readable.from(lines(items), { objectMode: false }));
    },
  );

  app.post<{ Params: { id: string; pid: string }; Body: ProcessSignal }>(
    `${base}/:pid/signal`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Send a signal to every process of the command',
        params: ProcessParams,
        body: ProcessSignal,
        response: { 200: ProcessInfo, ...errors },
      },
    },
    async (request) =>
      presentProcess(await service().signal(request.params.id, request.params.pid, execSignal(request.body.signal), callerOf(request))),
  );

  processInputRoutes(app, base, service);

  app.delete<{ Params: { id: string; pid: string } }>(
    `${base}/:pid`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Kill a background process (answers once it ended, or after 10 s)',
        params: ProcessParams,
        response: { 200: ProcessInfo, ...errors },
      },
    },
    async (request) => presentProcess(await service().kill(request.params.id, request.params.pid, callerOf(request))),
  );
}

/** Live input of a process started with `stdin: true` or `pty` (DESIGN.md §14 fourth bullet): stdin, EOF, resize. */
function processInputRoutes(app: FastifyInstance, base: string, service: () => NonNullable<HttpDeps['processes']>): void {
  const ok = Type.Object({ status: Type.Literal('ok') });
  app.post<{ Params: { id: string; pid: string }; Body: ProcessStdin }>(
    `${base}/:pid/stdin`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Write to the stdin of a process started with stdin: true (429 while 1 MiB of it is unread)',
        params: ProcessParams,
        body: ProcessStdin,
        response: { 200: ok, ...errors },
      },
    },
    async (request) => {
      const b = request.body;
      const data = b.encoding === 'base64' ? Buffer.from(b.data, 'base64') : Buffer.from(b.data, 'utf8');
      await service().writeStdin(request.params.id, request.params.pid, data, callerOf(request));
      return { status: 'ok' as const };
    },
  );
  app.post<{ Params: { id: string; pid: string } }>(
    `${base}/:pid/stdin/close`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Close the stdin of a process started with stdin: true (EOF after what was written)',
        params: ProcessParams,
        response: { 200: ok, ...errors },
      },
    },
    async (request) => {
      await service().closeStdin(request.params.id, request.params.pid, callerOf(request));
      return { status: 'ok' as const };
    },
  );
  app.post<{ Params: { id: string; pid: string }; Body: TerminalSize }>(
    `${base}/:pid/resize`,
    {
      schema: {
        tags: ['processes'],
        summary: 'Resize the terminal of a process started with pty',
        params: ProcessParams,
        body: TerminalSize,
        response: { 200: ok, ...errors },
      },
    },
    async (request) => {
      await service().resize(request.params.id, request.params.pid, request.body.cols, request.body.rows, callerOf(request));
      return { status: 'ok' as const };
    },
  );
}

async function* lines(items: AsyncIterable<ProcessOutputItem>): AsyncGenerator<string> {
  for await (const item of items) {
    if (item.stream === 'stdout' || item.stream === 'stderr') {
      // Each chunk on its own: text when it is valid UTF-8, else base64, so the bytes are exact.
      const enc = encodeOutput(item.data, true);
      yield JSON.stringify(
        enc.encoding
          ? { stream: item.stream, offset: item.offset, data: enc.data, encoding: enc.encoding }
          : { stream: item.stream, offset: item.offset, data: enc.data },
      ) + '\n';
    } else if (item.stream === 'truncated') {
      yield JSON.stringify({ stream: 'truncated', offset: item.offset }) + '\n';
    } else if (item.stream === 'exit') {
      yield JSON.stringify({ stream: 'exit', offset: item.offset, exit_code: item.exit_code, state: item.state }) + '\n';
    }
  }
}
