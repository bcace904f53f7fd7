/**
 * A worker's RPC server (spec 4.11, DESIGN.md §7): `POST /rpc` answers the JSON envelope
 * `{id, worker_id, result?|error?}` whatever happens, its HTTP status giving the class;
 * `worker.exec_stream` with `X-Worker-Stream: ndjson` streams one envelope per line, flushed per
 * chunk; `GET /rpc/exec/ws` is the interactive exec. Credentials are checked before anything is
 * read; errors never carry backend text.
 */
import { Readable } from 'node:stream';
import websocket from '@fastify/websocket';
import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import * as C from '../../../contracts/worker-rpc.js';
import { parseDuration } from '../../../core/duration.js';
import { badRequest, isSbxError, SbxError } from '../../../core/errors.js';
import type { ExecSpec } from '../../../core/ports/index.js';
import { sandboxPath } from '../../../core/sandboxes/paths.js';
import { execFrames, type ExecFrame } from '../../shared/exec-framing.js';
import { serveExecSocket } from '../../shared/exec-socket.js';
import { newPreviewStats } from '../../shared/preview/proxy.js';
import { PreviewRouter } from '../../shared/preview/router.js';
import { safeEqual } from '../../../core/auth/worker-credentials.js';
import { SpawnSlots } from '../../../core/worker/capacity.js';
import { authenticateRpc, requireScope } from './auth.js';
import type { RpcServerDeps } from './deps.js';
import { runOnRuntime } from '../../../core/worker/exec.js';
import { fenceCall, leaseHeader } from './fencing.js';
import { UploadStaging } from './files.js';
import { dispatch, execItems, runtimeOf } from './methods.js';

export interface RpcAppOptions {
  /** TLS: the server's certificate and key; with `ca`, client certificates are required and verified. */
  https?: { cert: Buffer; key: Buffer; ca?: Buffer };
}

const envelopeCheck = TypeCompiler.Compile(C.RpcRequest) as unknown as TypeCheck<TSchema>;
const paramChecks = Object.fromEntries(
  Object.entries(C.RPC_PARAMS).map(([m, s]) => [m, TypeCompiler.Compile(s as TSchema)]),
) as unknown as Record<C.RpcMethod, TypeCheck<TSchema>>;
const METHODS = new Set<string>(C.RPC_METHODS);
/** A 4 MiB window in base64 plus the envelope. */
const BODY_LIMIT = 8 * 1024 * 1024;

function firstError(check: TypeCheck<TSchema>, value: unknown, what: string): SbxError {
  const e = check.Errors(value).First();
  const where = e?.path ? `${e.path.replace(/^\//, '').replace(/\//g, '.')}: ` : '';
  return badRequest(`invalid ${what}: ${where}${e?.message ?? 'invalid'}`);
}

const inflight = new WeakMap<FastifyInstance, { count: number }>();

/** RPC calls this app is serving now (a drain waits for 0). */
export function callsInFlight(app: FastifyInstance): number {
  return inflight.get(app)?.count ?? 0;
}

export async function buildRpcApp(deps: RpcServerDeps, opts: RpcAppOptions = {}): Promise<FastifyInstance> {
  const https = opts.https
    ? {
        cert: opts.https.cert,
        key: opts.https.key,
        ...(opts.https.ca ? { ca: opts.https.ca, requestCert: true, rejectUnauthorized: true } : {}),
      }
    : null;
  const app = (https
    ? Fastify({ https, bodyLimit: BODY_LIMIT, logger: false })
    : Fastify({ bodyLimit: BODY_LIMIT, logger: false })) as unknown as FastifyInstance;
  // Calls in flight, for the drain: each counts until its response finished or its connection closed.
  const calls = { count: 0 };
  inflight.set(app, calls);
  app.addHook('onRequest', (_request, reply, done) => {
    calls.count++;
    reply.raw.once('close', () => calls.count--);
    done();
  });
  await app.register(websocket, { options: { maxPayload: BODY_LIMIT } });
  // Previews of this worker's sandboxes (DESIGN §9): by Host under its own preview domain, and
  // forwarded by its control plane at /rpc/preview/<sandbox_id>/<port>/… with worker credentials.
  previewRouter(deps).attach(app.server);
  app.setNotFoundHandler((request, reply) =>
    rpcAnswer(deps, reply, '', new SbxError('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );
  registerRpcRoutes(app, deps);
  return app;
}

/**
 * The RPC on another app's listener (a replica's API, DESIGN §7): the same routes in a context of
 * their own, so their errors are envelopes; path-routed previews are attached to its server.
 * The app must have @fastify/websocket registered.
 */
export async function mountRpc(app: FastifyInstance, deps: RpcServerDeps): Promise<void> {
  await app.register((child, _opts, done) => {
    registerRpcRoutes(child, deps);
    done();
  });
  previewRouter(deps).attach(app.server);
}

/** The answer envelope of a failed call; backend text never leaves. */
function rpcAnswer(deps: RpcServerDeps, reply: FastifyReply, id: string, err: unknown) {
  const e = isSbxError(err) ? err : new SbxError('provider_error', 'the provider failed');
  if (!isSbxError(err)) deps.log.warn({ err: String((err as Error)?.name ?? 'error') }, 'worker RPC failed');
  const status = C.RPC_STATUS_BY_CODE[e.code] ?? 500;
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send({ id, worker_id: deps.workerId, error: { code: e.code, message: e.message } });
}

/** A call's sandbox, when its params name one. */
function sandboxOf(params: unknown): string | null {
  const id = (params as { sandbox_id?: unknown } | null)?.sandbox_id;
  return typeof id === 'string' && id !== '' ? id : null;
}

/** `POST /rpc`, its 405 twins and `GET /rpc/exec/ws` on `app` (its error handler answers envelopes). */
function registerRpcRoutes(app: FastifyInstance, deps: RpcServerDeps): void {
  const staging = new UploadStaging(deps.stagingDir);
  const slots = new SpawnSlots(
    deps.workerId,
    () => deps.maxSandboxes ?? 0,
    () => deps.state.countRuntimes(),
  );
  app.addHook('onClose', async () => staging.close());
  const answer = (reply: FastifyReply, id: string, err: unknown) => rpcAnswer(deps, reply, id, err);

  // Body parse errors, oversized bodies: still the envelope.
  app.setErrorHandler((err: Error & { statusCode?: number }, _request, reply) => {
    if (isSbxError(err)) return answer(reply, '', err);
    if (err.statusCode === 413) return answer(reply, '', new SbxError('payload_too_large', 'the RPC body is too large'));
    if (err.statusCode && err.statusCode < 500) return answer(reply, '', badRequest('malformed RPC request'));
    return answer(reply, '', err);
  });

  app.post(C.RPC_PATH, { bodyLimit: BODY_LIMIT }, async (request, reply) => {
    const body = request.body as Record<string, unknown> | undefined;
    const id = typeof body?.id === 'string' ? body.id : '';
    let identity;
    try {
      identity = authenticateRpc(request.headers, deps);
    } catch (err) {
      return answer(reply, id, err);
    }
    try {
      if (!envelopeCheck.Check(body)) throw firstError(envelopeCheck, body, 'RPC envelope');
      const env = body as unknown as C.RpcRequest;
      if (env.worker_id !== deps.workerId) throw new SbxError('forbidden', `this is worker ${deps.workerId}, not ${env.worker_id}`);
      if (!METHODS.has(env.method)) throw new SbxError('not_implemented', `unknown RPC method ${JSON.stringify(env.method)}`);
      const method = env.method as C.RpcMethod;
      requireScope(identity, C.RPC_SCOPE[method]);
      const params = env.params ?? {};
      if (!paramChecks[method].Check(params)) throw firstError(paramChecks[method], params, `${method} params`);
      const sandboxId = sandboxOf(params) ?? (method === 'worker.renew_lease' ? sandboxOf({ sandbox_id: params.resource_id }) : null);
      if (deps.prepare && sandboxId !== null) await deps.prepare(sandboxId);
      // Fencing (DESIGN §7): a stale lease is refused here, before any method changes anything.
      const lease = fenceCall(deps, method, params, env.lease);
      const signal = abortOnClose(reply);
      if (method === 'worker.exec_stream')
        return streamExec(reply, deps, env.id, params as C.ExecParams, request.headers[C.RPC_STREAM_HEADER] === 'ndjson', signal);
      if (method === 'worker.file_watch') return streamWatch(reply, deps, env.id, params as Static<typeof C.FileWatchParams>, signal);
      const result = await dispatch(deps, { staging, slots }, { method, params, lease, signal });
      return reply.code(200).send({ id: env.id, worker_id: deps.workerId, result });
    } catch (err) {
      return answer(reply, id, err);
    }
  });
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH'] as const) {
    app.route({
      method,
      url: C.RPC_PATH,
      handler: (_req, reply) => answer(reply.header('Allow', 'POST'), '', new SbxError('method_not_allowed', 'the worker RPC takes POST')),
    });
  }

  app.route<{ Querystring: Record<string, string> }>({
    method: 'GET',
    url: C.RPC_EXEC_WS_PATH,
    // Refusals answer over plain HTTP, before the upgrade.
    preValidation: async (request, reply) => {
      try {
        requireScope(authenticateRpc(request.headers, deps), 'worker:exec');
        const q = request.query;
        if (deps.prepare && q.sandbox_id) await deps.prepare(q.sandbox_id);
        const target = { sandbox_id: q.sandbox_id ?? '', provider: q.provider ?? '', runtime_id: q.runtime_id ?? '' };
        fenceCall(deps, 'worker.exec', target, leaseHeader(request.headers[C.RPC_LEASE_HEADER]));
        runtimeOf(deps, target);
      } catch (err) {
        return answer(reply, '', err);
      }
    },
    handler: (_request, reply) => answer(reply, '', badRequest('this endpoint is a WebSocket: send an Upgrade: websocket request')),
    wsHandler: (socket: WebSocket, request: FastifyRequest) => {
      const q = request.query as Record<string, string>;
      const target = { sandbox_id: q.sandbox_id!, provider: q.provider!, runtime_id: q.runtime_id! };
      serveExecSocket(
        socket,
        async (input, signal) => {
          const provider = runtimeOf(deps, target);
          const spec: ExecSpec = { command: input.command, args: input.args ?? [], mode: input.mode ?? 'shell', env: input.env ?? {} };
          if (input.workdir !== undefined) spec.workdir = sandboxPath(input.workdir, 'workdir');
          if (input.stdin !== undefined) spec.stdin = input.stdin;
          if (input.tty !== undefined) spec.tty = input.tty;
          if (input.controls !== undefined) spec.controls = input.controls;
          const limit = input.timeout ? parseDuration(input.timeout, 'timeout') : 0;
          return runOnRuntime(provider, target.runtime_id, spec, limit, signal);
        },
        { onInternalError: (err) => deps.log.warn({ err: String((err as Error)?.name ?? 'error') }, 'worker exec socket failed') },
      );
    },
  });
}

function previewRouter(deps: RpcServerDeps): PreviewRouter {
  return new PreviewRouter({
    domain: deps.previewDomain ?? '',
    resolve: async (sandboxId, port) => {
      await deps.prepare?.(sandboxId);
      const rt = deps.state.getRuntime(sandboxId);
      if (!rt) throw new SbxError('not_found', `sandbox ${sandboxId} not found`);
      const provider = deps.providers.get(rt.provider);
      if (!provider) throw new SbxError('not_found', `sandbox ${sandboxId} not found`);
      if (!provider.previewUpstream) throw new SbxError('not_implemented', `provider ${rt.provider} cannot serve previews`);
      return provider.previewUpstream(rt.runtime_id, port);
    },
    path: { prefix: `${C.RPC_PATH}/preview/`, authenticate: (headers) => requireScope(authenticateRpc(headers, deps), 'worker:exec') },
    // Its own preview host checks the token the control plane sent with the spawn (preview_auth).
    token: {
      required: (id) => Boolean(deps.state.getRuntime(id)?.preview_token),
      matches: (id, given) => given !== undefined && safeEqual(given, deps.state.getRuntime(id)?.preview_token ?? ''),
    },
    stats: deps.previewStats ?? newPreviewStats(),
  });
}

function abortOnClose(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort(new Error('the control plane closed the call'));
  });
  return ac.signal;
}

/** `worker.exec_stream`: NDJSON envelopes flushed per chunk, or the buffered `{sandbox_id, chunks}`. */
async function streamExec(
  reply: FastifyReply,
  deps: RpcServerDeps,
  id: string,
  params: C.ExecParams,
  ndjson: boolean,
  signal: AbortSignal,
) {
  const items = execItems(deps, params, signal);
  const envelope = (result: unknown) => ({ id, worker_id: deps.workerId, result });
  /** A frame as the RPC result: output always base64, the exit with its duration. */
  const result = (f: ExecFrame) =>
    f.kind === 'output'
      ? { stream: f.stream, data: f.data, encoding: 'base64' }
      : f.kind === 'exit'
        ? { stream: 'exit', exit_code: f.exit_code, duration: f.duration }
        : null;
  if (!ndjson) {
    const chunks: unknown[] = [];
    for await (const f of execFrames(items, 'base64')) {
      if (f.kind === 'error') throw new SbxError(f.code as never, f.message);
      chunks.push(result(f));
    }
    return reply.code(200).send(envelope({ sandbox_id: params.sandbox_id, chunks }));
  }
  // The first frame (or failure) is awaited up to a second before the headers go: lookups and a
  // command that cannot start fail with their status; a quiet command streams on.
  const it = execFrames(items, 'base64', (err) => {
    if (signal.aborted) return false;
    if (!isSbxError(err)) deps.log.warn({ err: String((err as Error)?.name ?? 'error') }, 'worker exec failed');
    return true;
  });
  const first = it.next();
  let timer: NodeJS.Timeout | undefined;
  const quiet = new Promise<'quiet'>((resolve) => (timer = setTimeout(() => resolve('quiet'), 1000)));
  try {
    const early = await Promise.race([first, quiet]);
    if (early === 'quiet') first.catch(() => undefined);
    else if (!early.done && early.value.kind === 'error') throw new SbxError(early.value.code as never, early.value.message);
  } finally {
    clearTimeout(timer);
  }
  async function* lines(): AsyncGenerator<string> {
    for (let r = await first; !r.done; r = await it.next()) {
      const f = r.value;
      if (f.kind === 'error') yield JSON.stringify({ id, worker_id: deps.workerId, error: { code: f.code, message: f.message } }) + '\n';
      else yield JSON.stringify(envelope(result(f))) + '\n';
    }
  }
  reply.header('Content-Type', 'application/x-ndjson; charset=utf-8');
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).send(Readable.from(withKeepAlive(lines(), KEEPALIVE_MS), { objectMode: false, highWaterMark: 0 }));
}

/**
 * `worker.file_watch` (DESIGN §16): the provider's watch, in place before the headers go (refusals
 * answer with their status), then one envelope per change; closing the call ends the watch.
 */
async function streamWatch(
  reply: FastifyReply,
  deps: RpcServerDeps,
  id: string,
  params: Static<typeof C.FileWatchParams>,
  signal: AbortSignal,
) {
  const provider = runtimeOf(deps, params);
  if (!provider.watch) throw new SbxError('not_implemented', `provider ${params.provider} cannot watch files`);
  const events = await provider.watch(params.runtime_id, sandboxPath(params.path), { recursive: params.recursive }, signal);
  async function* lines(): AsyncGenerator<string> {
    for await (const ev of events) yield JSON.stringify({ id, worker_id: deps.workerId, result: ev }) + '\n';
  }
  reply.header('Content-Type', 'application/x-ndjson; charset=utf-8');
  reply.header('Cache-Control', 'no-store');
  return reply.code(200).send(Readable.from(withKeepAlive(lines(), KEEPALIVE_MS), { objectMode: false, highWaterMark: 0 }));
}

/** A quiet command still sends a blank line this often, so the control plane can tell a dead link. */
export const KEEPALIVE_MS = 5_000;

/** The lines, with a blank line whenever none came for `ms` (NDJSON readers skip blank lines). */
async function* withKeepAlive(lines: AsyncGenerator<string>, ms: number): AsyncGenerator<string> {
  let next = lines.next();
  try {
    // A blank line at once: the status and headers leave now, not with the command's first output,
    // so the control plane holds an open stream (and can cancel it) while the command is quiet.
    yield '\n';
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const idle = new Promise<'idle'>((resolve) => (timer = setTimeout(() => resolve('idle'), ms)));
      const r = await Promise.race([next, idle]);
      clearTimeout(timer);
      if (r === 'idle') {
        yield '\n';
        continue;
      }
      if (r.done) return;
      yield r.value;
      next = lines.next();
    }
  } finally {
    await lines.return(undefined);
  }
}
