/**
 * The reference server of the custom HTTP provider contract (docs/providers/custom-http.md): every
 * route answered by a real local Provider (mock, proot or docker), so the contract suite runs over
 * real HTTP and operators have a template for their own backends. Every request needs `X-API-Key`
 * (compared in constant time); errors answer the contract's statuses with `{code, message}`.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { TSchema, Static } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import * as C from '../../contracts/custom-http.js';
import { safeEqual } from '../../core/auth/worker-credentials.js';
import { badRequest, isSbxError, SbxError } from '../../core/errors.js';
import { EXEC_SIGNALS, type FileInfo, type Provider } from '../../core/ports/index.js';
import { handleExec, type LiveExec } from './exec.js';

export interface ProviderServerOptions {
  provider: Provider;
  /** The key every request must carry in `X-API-Key`. */
  apiKey: string;
  /** Told about failures that are not SbxErrors (never sent to the caller). */
  onError?: (err: unknown) => void;
  /**
   * Behave exactly as the anchor's contract documents (`sbx provider-server --anchor`): no sbx
   * additions — a streamed exec sends `{stream, data}` text lines and no exit line, a buffered one
   * `{exit_code, stdout, stderr}` as text, `/health` announces no capabilities.
   */
  anchor?: boolean;
}

/** A file of 64 MiB in base64 plus the envelope. */
const BODY_LIMIT = 96 * 1024 * 1024;

const checks = new Map<TSchema, TypeCheck<TSchema>>();
function valid<S extends TSchema>(schema: S, value: unknown, what: string): Static<S> {
  let c = checks.get(schema);
  if (!c) checks.set(schema, (c = TypeCompiler.Compile(schema)));
  if (!c.Check(value)) {
    const e = c.Errors(value).First();
    throw badRequest(`invalid ${what}: ${e?.path ? `${e.path.slice(1)}: ` : ''}${e?.message ?? 'invalid'}`);
  }
  return value as Static<S>;
}

const q = (query: unknown, key: string): string => {
  const v = (query as Record<string, unknown>)[key];
  if (typeof v !== 'string' || v === '') throw badRequest(`query parameter ${key} is required`);
  return v;
};

const wireInfo = (f: FileInfo) => ({ name: f.name, path: f.path, size: f.size, is_dir: f.is_dir, mod_time: f.mod_time, mode: f.mode });
const modeBits = (m: string) => parseInt(m, 8);

export async function buildProviderServer(opts: ProviderServerOptions): Promise<FastifyInstance> {
  const { provider: p } = opts;
  const app = Fastify({ bodyLimit: BODY_LIMIT, logger: false }) as unknown as FastifyInstance;
  const live = new Map<string, LiveExec>();

  const fail = (reply: FastifyReply, err: unknown) => {
    const e = isSbxError(err) ? err : new SbxError('provider_error', 'the provider failed');
    if (!isSbxError(err)) opts.onError?.(err);
    return reply.code(C.STATUS_BY_CODE[e.code] ?? 500).send({ code: e.code, message: e.message });
  };
  app.setErrorHandler((err: Error & { statusCode?: number }, _request, reply) => {
    if (isSbxError(err)) return fail(reply, err);
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) return fail(reply, err);
    return reply
      .code(status)
      .send({ code: status === 413 ? 'payload_too_large' : 'bad_request', message: 'the request could not be read' });
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ code: 'not_found', message: 'no such route' }));
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // The key before anything is read.
  app.addHook('onRequest', async (request, reply) => {
    const presented = request.headers[C.CUSTOM_HTTP_KEY_HEADER];
    if (typeof presented !== 'string' || !safeEqual(presented, opts.apiKey)) {
      return reply.code(401).send({ code: 'unauthorized', message: 'missing or wrong X-API-Key' });
    }
    return undefined;
  });

  app.get('/health', async (_request, reply) => {
    const h = await p.health();
    const body: C.HealthResponse = opts.anchor ? { ok: h.healthy } : { ok: h.healthy, capabilities: [...p.capabilities, 'exec_stdin'] };
    if (h.runtime_count !== undefined) body.runtime_count = h.runtime_count;
    return reply.code(h.healthy ? 200 : 503).send(body);
  });

  app.post('/spawn', async (request, reply) => {
    const b = valid(C.SpawnRequest, request.body, 'spawn request');
    const sandbox_id = b.sandbox_id ?? `sb-${randomBytes(6).toString('hex')}`;
    const res = await p.spawn({
      sandbox_id,
      image: b.image,
      memory_mb: b.memory_mb ?? 512,
      vcpus: b.vcpus ?? 1,
      metadata: b.metadata ?? {},
      owner_id: null,
      ...(b.network ? { network: b.network } : {}),
    });
    return reply.code(201).send(res.network ? { id: res.runtime_id, network: res.network } : { id: res.runtime_id });
  });

  app.get('/status/:id', async (request, reply) => {
    const id = (request.params as { id: string }).id;
    const state = await p.status(id);
    if (state === 'missing') return reply.code(404).send({ code: 'not_found', message: 'no such sandbox' });
    return reply.send({ id, state });
  });

  app.delete('/sandboxes/:id', async (request, reply) => {
    await p.destroy((request.params as { id: string }).id);
    return reply.code(204).send();
  });

  app.post('/exec', async (request, reply) =>
    handleExec(p, live, valid(C.ExecRequest, request.body, 'exec request'), reply, (err) => opts.onError?.(err), opts.anchor === true),
  );

  app.post('/exec/:execId/stdin', async (request, reply) => {
    const entry = live.get((request.params as { execId: string }).execId);
    if (!entry?.stdin) return reply.code(404).send({ code: 'not_found', message: 'no live stdin under this exec_id' });
    const chunk = request.body;
    if (chunk !== undefined && chunk !== null && !Buffer.isBuffer(chunk)) throw badRequest('stdin chunks are application/octet-stream');
    if (Buffer.isBuffer(chunk) && chunk.length > 0) entry.stdin.push(chunk);
    if ((request.query as { eof?: string }).eof === '1') entry.stdin.end();
    await entry.room();
    return reply.code(204).send();
  });

  app.post('/exec/:execId/control', async (request, reply) => {
    const entry = live.get((request.params as { execId: string }).execId);
    if (!entry) return reply.code(404).send({ code: 'not_found', message: 'no live exec under this exec_id' });
    const c = valid(C.ExecControlRequest, request.body, 'control');
    if (c.type === 'signal') {
      if (!(EXEC_SIGNALS as readonly string[]).includes(c.signal)) throw badRequest(`unknown signal ${c.signal}`);
      entry.controls.push({ type: 'signal', signal: c.signal as (typeof EXEC_SIGNALS)[number] });
    } else {
      entry.controls.push(c);
    }
    return reply.code(204).send();
  });

  fileRoutes(app, p);

  app.get('/logs', async (request, reply) => {
    const query = request.query as Record<string, string | undefined>;
    const lines = Number(query.lines ?? '100');
    const after = query.after !== undefined ? Number(query.after) : undefined;
    if (!Number.isInteger(lines) || lines < 0 || (after !== undefined && (!Number.isInteger(after) || after < 0)))
      throw badRequest('lines and after are non-negative integers');
    const log = await p.logs(q(request.query, 'sandbox_id'), after === undefined ? { lines } : { lines, after });
    return reply.send(log);
  });

  app.addHook('onClose', async () => {
    for (const entry of live.values()) {
      entry.stdin?.end();
      entry.controls.end();
    }
  });
  return app;
}

/** The anchor's `/files…` routes over the provider's file methods. */
function fileRoutes(app: FastifyInstance, p: Provider): void {
  app.post('/files', async (request, reply) => {
    const b = valid(C.WriteFileRequest, request.body, 'write request');
    const content = Buffer.from(b.content, b.encoding === 'base64' ? 'base64' : 'utf8');
    await p.writeFile(b.sandbox_id, b.path, content, b.mode !== undefined ? modeBits(b.mode) : undefined);
    return reply.code(204).send();
  });

  app.get('/files', async (request, reply) => {
    const id = q(request.query, 'sandbox_id');
    const path = q(request.query, 'path');
    reply.header('content-type', 'application/octet-stream');
    if (p.openFile) {
      const file = await p.openFile(id, path);
      reply.header('content-length', String(file.size));
      return reply.send(Readable.from(file.body));
    }
    const bytes = await p.readFile(id, path);
    return reply.send(Buffer.from(bytes));
  });

  app.delete('/files', async (request, reply) => {
    const b = valid(C.DeleteFileRequest, request.body, 'delete request');
    await p.deleteFile(b.sandbox_id, b.path, b.recursive === true);
    return reply.code(204).send();
  });

  app.get('/files/list', async (request, reply) =>
    reply.send((await p.listFiles(q(request.query, 'sandbox_id'), q(request.query, 'path'))).map(wireInfo)),
  );
  app.get('/files/stat', async (request, reply) =>
    reply.send(wireInfo(await p.stat(q(request.query, 'sandbox_id'), q(request.query, 'path')))),
  );
  app.get('/files/glob', async (request, reply) => reply.send(await p.glob(q(request.query, 'sandbox_id'), q(request.query, 'pattern'))));

  app.post('/files/move', async (request, reply) => {
    const b = valid(C.MoveFileRequest, request.body, 'move request');
    await p.moveFile(b.sandbox_id, b.old_path, b.new_path);
    return reply.code(204).send();
  });

  app.post('/files/chmod', async (request, reply) => {
    const b = valid(C.ChmodRequest, request.body, 'chmod request');
    await p.chmod(b.sandbox_id, b.path, modeBits(b.mode));
    return reply.code(204).send();
  });
}
