import { Type } from '@sinclair/typebox';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest, SbxError } from '../../../core/errors.js';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import {
  ChmodRequest,
  DeleteQuery,
  FileInfo,
  GlobQuery,
  ListQuery,
  MoveRequest,
  PathQuery,
  RawBytes,
  WriteFileQuery,
  WriteFileRequest,
  type WriteFileRequest as WriteBody,
} from '../../../contracts/files.js';
import { readAll } from '../../../core/sandboxes/files.js';
import { callerOf } from '../caller.js';
import { decodeText } from '../encoding.js';
import type { HttpDeps } from '../deps.js';
import { releaseBuffer } from '../content-sink.js';
import { contentBytes, declaredLength, FileWriteScanner, takeContent } from '../file-write-body.js';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 413: ErrorBody, 500: ErrorBody, 503: ErrorBody };
const BASE = '/api/v1/sandboxes/:id/files';
type P = { Params: { id: string } };

/**
 * The JSON write body read as a stream (file-write-body.ts): never one string of the whole body.
 * Bound by the body limit like any body; the upload's bytes are on the in-flight budget (inflight.ts).
 */
function streamedJsonParser(bodyLimit: number, maxFileBytes: number) {
  return (request: FastifyRequest, payload: NodeJS.ReadableStream, done: (err: Error | null, body?: unknown) => void) => {
    const declared = declaredLength(request);
    if (declared > bodyLimit) return done(new SbxError('payload_too_large', 'request body is larger than the server accepts'));
    // base64 text of a file at the limit, plus room for the other members.
    const scanner = new FileWriteScanner(declared, Math.min(bodyLimit, Math.ceil(maxFileBytes / 3) * 4 + 4 * 1024 * 1024));
    let received = 0;
    let finished = false;
    const finish = (err: Error | null, body?: unknown) => {
      if (finished) return;
      finished = true;
      payload.removeListener('data', onData);
      if (err) payload.resume(); // the rest of the body is dropped
      done(err, body);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > bodyLimit) return finish(new SbxError('payload_too_large', 'request body is larger than the server accepts'));
      try {
        scanner.write(chunk);
      } catch (err) {
        finish(err as Error);
      }
    };
    payload.on('data', onData);
    payload.on('end', () => {
      try {
        finish(null, scanner.end());
      } catch (err) {
        finish(err as Error);
      }
    });
    payload.on('error', (err: Error) => finish(err));
    // The client went away mid-body: nothing is written (the handler never runs).
    request.raw.once('close', () => {
      if (!request.raw.complete) finish(badRequest('the request body was cut short'));
    });
  };
}

const JSON_TYPE = 'application/json';
const RAW_TYPE = 'application/octet-stream';
/** Reads up to this size are sent in one piece. */
const STREAM_ABOVE = 256 * 1024;

/** Spec 4.2: the eight file operations. */
export function fileRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['files'];

  // The write route in its own scope, where application/json bodies go to the streaming parser.
  void app.register((scope, _opts, done) => {
    scope.removeContentTypeParser(JSON_TYPE);
    scope.addContentTypeParser(JSON_TYPE, streamedJsonParser(deps.bodyLimit, deps.settings.limits.max_file_bytes));
    // Two forms on one route: the spec's JSON body, and (sbx extension) the raw bytes as an
    // application/octet-stream body with path and mode in the query string. Fastify validates the
    // body by media type; a body of any other type (or none) gets the JSON form's check, as before.
    scope.post<P & { Body: WriteBody | Buffer; Querystring: WriteFileQuery }>(
      BASE,
      {
        schema: {
          tags,
          summary: 'Write a file (JSON, encoding base64 for binary; or raw application/octet-stream bytes with path and mode in the query)',
          params: IdParams,
          querystring: WriteFileQuery,
          body: { content: { [JSON_TYPE]: { schema: WriteFileRequest }, [RAW_TYPE]: { schema: RawBytes } } },
          response: { 200: StatusBody('written'), ...errors },
        },
        preValidation: async (request) => {
          if (request.mediaType === JSON_TYPE || request.mediaType === RAW_TYPE) return;
          const validate = request.compileValidationSchema(WriteFileRequest, 'body');
          if (!validate(request.body)) {
            throw Object.assign(new Error('invalid body'), {
              statusCode: 400,
              validation: validate.errors ?? [],
              validationContext: 'body',
            });
          }
        },
      },
      async (request) => {
        const body = request.body;
        if (Buffer.isBuffer(body)) {
          await deps.files.write(request.params.id, request.query.path ?? '', body, request.query.mode, callerOf(request));
          return { status: 'written' as const };
        }
        const streamed = takeContent(body);
        const bytes = streamed ? contentBytes(streamed, body.encoding) : decodeText(body.content, body.encoding, 'content');
        try {
          await deps.files.write(request.params.id, body.path, bytes, body.mode, callerOf(request));
        } finally {
          // The upload's memory goes back now, not at the next garbage collection.
          if (streamed) releaseBuffer(bytes);
        }
        return { status: 'written' as const };
      },
    );
    done();
  });

  app.get<P & { Querystring: { path: string } }>(
    BASE,
    { schema: { tags, summary: 'Read a file (raw bytes)', params: IdParams, querystring: PathQuery, response: errors } },
    async (request, reply) => {
      const file = await deps.files.open(request.params.id, request.query.path, callerOf(request));
      reply.type('application/octet-stream');
      // Small files go out in one write; larger ones stream as the sandbox sends them. A failure
      // mid-stream cuts the connection short of Content-Length, so a client never takes a partial
      // file for a whole one.
      if (file.size <= STREAM_ABOVE) {
        const data = await readAll(file);
        return reply.send(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      }
      return reply.header('content-length', file.size).send(Readable.from(file.body, { objectMode: false }));
    },
  );

  app.delete<P & { Querystring: { path: string; recursive?: boolean } }>(
    BASE,
    {
      schema: {
        tags,
        summary: 'Delete a file or directory',
        params: IdParams,
        querystring: DeleteQuery,
        response: { 200: StatusBody('deleted'), ...errors },
      },
    },
    async (request) => {
      await deps.files.remove(request.params.id, request.query.path, request.query.recursive ?? false, callerOf(request));
      return { status: 'deleted' as const };
    },
  );

  app.get<P & { Querystring: { path?: string } }>(
    `${BASE}/list`,
    {
      schema: {
        tags,
        summary: 'List a directory',
        params: IdParams,
        querystring: ListQuery,
        response: { 200: Type.Array(FileInfo), ...errors },
      },
    },
    async (request) => deps.files.list(request.params.id, request.query.path || undefined, callerOf(request)),
  );

  app.post<P & { Body: { old_path: string; new_path: string } }>(
    `${BASE}/move`,
    { schema: { tags, summary: 'Move or rename', params: IdParams, body: MoveRequest, response: { 200: StatusBody('moved'), ...errors } } },
    async (request) => {
      await deps.files.move(request.params.id, request.body.old_path, request.body.new_path, callerOf(request));
      return { status: 'moved' as const };
    },
  );

  app.post<P & { Body: { path: string; mode: string } }>(
    `${BASE}/chmod`,
    {
      schema: {
        tags,
        summary: 'Change mode',
        params: IdParams,
        body: ChmodRequest,
        response: { 200: StatusBody('chmod applied'), ...errors },
      },
    },
    async (request) => {
      await deps.files.chmod(request.params.id, request.body.path, request.body.mode, callerOf(request));
      return { status: 'chmod applied' as const };
    },
  );

  app.get<P & { Querystring: { path: string } }>(
    `${BASE}/stat`,
    { schema: { tags, summary: 'Stat a path', params: IdParams, querystring: PathQuery, response: { 200: FileInfo, ...errors } } },
    async (request) => deps.files.stat(request.params.id, request.query.path, callerOf(request)),
  );

  app.get<P & { Querystring: { pattern: string } }>(
    `${BASE}/glob`,
    {
      schema: {
        tags,
        summary: 'Glob paths',
        params: IdParams,
        querystring: GlobQuery,
        response: { 200: Type.Array(Type.String()), ...errors },
      },
    },
    async (request) => deps.files.glob(request.params.id, request.query.pattern, callerOf(request)),
  );
}
