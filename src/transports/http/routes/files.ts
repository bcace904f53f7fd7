import { Type } from '@sinclair/typebox';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
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
import { readAll } from '../../../core/sandboxes/file-bytes.js';
import { callerOf } from '../caller.js';
import { decodeText } from '../../shared/encoding.js';
import type { HttpDeps } from '../deps.js';
import { streamedUploadParser, takeUpload, uploadOf } from '../file-upload.js';
import { STREAMED_UPLOAD } from '../inflight.js';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 413: ErrorBody, 500: ErrorBody, 503: ErrorBody };
const BASE = '/api/v1/sandboxes/:id/files';
type P = { Params: { id: string } };

const JSON_TYPE = 'application/json';
const RAW_TYPE = 'application/octet-stream';
/** Reads up to this size are sent in one piece. */
const STREAM_ABOVE = 256 * 1024;

/** Spec 4.2: the eight file operations. */
export function fileRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['files'];

  writeRoute(app, deps, tags);

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

/** The write route in its own scope, where application/json bodies go to the streaming parser. */
function writeRoute(app: FastifyInstance, deps: HttpDeps, tags: string[]): void {
  void app.register((scope, _opts, done) => {
    scope.removeContentTypeParser(JSON_TYPE);
    scope.addContentTypeParser(JSON_TYPE, streamedUploadParser(deps.bodyLimit));
    // Whatever happened (a refused credential, a failed validation), an upload's spool goes with its request.
    scope.addHook('onResponse', async (request) => void (await uploadOf(request.body)?.dispose()));
    // Two forms on one route: the spec's JSON body, and (sbx extension) the raw bytes as an
    // application/octet-stream body with path and mode in the query string. Fastify validates the
    // body by media type; a body of any other type (or none) gets the JSON form's check, as before.
    scope.post<P & { Body: WriteBody | Buffer; Querystring: WriteFileQuery }>(
      BASE,
      {
        // JSON bodies stream into the sandbox: the in-flight budget holds a slice for them, not their length.
        config: { [STREAMED_UPLOAD]: true },
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
        // A JSON body: its content streams into the sandbox as it arrives (file-upload.ts).
        const upload = takeUpload(body);
        if (upload) {
          await upload.run((content, mode) =>
            deps.files.writeStream(request.params.id, body.path, content, mode, callerOf(request), deps.inflight),
          );
          return { status: 'written' as const };
        }
        const bytes = decodeText(body.content, body.encoding, 'content');
        await deps.files.write(request.params.id, body.path, bytes, body.mode, callerOf(request));
        return { status: 'written' as const };
      },
    );
    done();
  });
}
