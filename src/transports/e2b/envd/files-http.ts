import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { SbxError } from '../../../core/errors.js';
import type { EnvdDeps } from './deps.js';
import { httpErrorOf } from './errors.js';
import { ACCESS_TOKEN_HEADER, type EnvdTarget, resolveTarget } from './target.js';
import { actsAs, writeAsUser } from './owner.js';
import { accountOf, resolvePath, userOf } from './users.js';

/** Multipart overhead allowed beyond the file size limit (part headers, boundaries). */
const MULTIPART_SLACK = 1024 * 1024;

/**
 * E2B's envd `/files` (DESIGN.md §14) over sbx's file API: `GET` streams a file's bytes, `POST`
 * writes one file from a raw body (`application/octet-stream`, streamed into the sandbox, gzip
 * when `Content-Encoding: gzip`) or one or more from `multipart/form-data` parts named `file`
 * (each written at the `path` query, else at its filename). Paths are the query's `path`
 * (relative ones under the user's home). Authorized by `X-Access-Token` or by a signature made
 * from it (`signature`, `signature_expiration`), as E2B's SDK signs URLs. Answers `[{name, type, path}]`.
 */
export async function serveFiles(deps: EnvdDeps, req: IncomingMessage, res: ServerResponse, sandboxId: string | null): Promise<void> {
  try {
    const url = new URL(req.url ?? '/', 'http://envd');
    const q = url.searchParams;
    const operation = req.method === 'GET' ? 'read' : req.method === 'POST' ? 'write' : null;
    if (!operation) throw new SbxError('method_not_allowed', `${req.method} is not allowed on /files`);
    const token = header(req, ACCESS_TOKEN_HEADER);
    const t = await resolveTarget(deps, sandboxId, token, (tok) => signatureMatches(q, operation, tok, Date.now()));
    const account = await accountOf(deps, t, userOf(header(req, 'authorization'), q.get('username')));
    const path = q.get('path');
    if (operation === 'read') {
      if (!path) throw new SbxError('bad_request', 'path is required');
      return await download(deps, t, resolvePath(path, account), res);
    }
    const written = await upload(deps, t, req, path, account);
    send(res, 200, written);
  } catch (err) {
    req.resume();
    const e = httpErrorOf(err);
    if (!res.headersSent) send(res, e.status, e.body);
    else res.destroy();
  }
}

async function download(deps: EnvdDeps, t: EnvdTarget, path: string, res: ServerResponse): Promise<void> {
  const file = await deps.files.open(t.rec.id, path, t.caller);
  const name = path.split('/').pop() || 'file';
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-length': file.size,
    'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name)}`,
  });
  // pipeline-free streaming with back-pressure: wait for drain when the socket is full.
  for await (const chunk of file.body) {
    if (res.destroyed) break;
    if (!res.write(chunk)) await new Promise<void>((resolve) => res.once('drain', resolve).once('close', resolve));
  }
  res.end();
}

type Written = { name: string; type: 'file'; path: string };

async function upload(
  deps: EnvdDeps,
  t: EnvdTarget,
  req: IncomingMessage,
  path: string | null,
  account: Awaited<ReturnType<typeof accountOf>>,
): Promise<Written[]> {
  const type = header(req, 'content-type') ?? '';
  const gzip = /^gzip$/i.test(header(req, 'content-encoding') ?? '');
  const body: AsyncIterable<Uint8Array> = gzip ? req.pipe(createGunzip()) : req;
  if (/^multipart\/form-data/i.test(type)) return uploadMultipart(deps, t, body, type, path, account);
  if (!path) throw new SbxError('bad_request', 'path is required for a raw upload');
  const target = resolvePath(path, account);
  if (actsAs(account)) await writeAsUser(deps, t, account, target, body);
  else await deps.files.writeStream(t.rec.id, target, body, () => undefined, t.caller);
  return [writtenOf(target)];
}

async function uploadMultipart(
  deps: EnvdDeps,
  t: EnvdTarget,
  body: AsyncIterable<Uint8Array>,
  type: string,
  path: string | null,
  account: Awaited<ReturnType<typeof accountOf>>,
): Promise<Written[]> {
  const max = deps.sandboxes.deps.settings.limits.max_file_bytes + MULTIPART_SLACK;
  let size = 0;
  let held = 0;
  const tooLarge = () => new SbxError('payload_too_large', `a multipart upload is limited to ${max} bytes; send large files raw`);
  // The parts are read whole (the SDK sends multipart only for data it already holds): each byte is
  // held against the server's in-flight budget until the files are written.
  const capped = Readable.from(
    (async function* () {
      for await (const chunk of body) {
        size += chunk.byteLength;
        if (size > max) throw tooLarge();
        if (deps.budget && !deps.budget.take(chunk.byteLength))
          throw new SbxError('unavailable', 'the server holds too much in-flight data right now; retry later (server.max_inflight_mb)');
        held += chunk.byteLength;
        yield chunk;
      }
    })(),
  );
  try {
    return await writeParts(deps, t, capped, type, path, account);
  } finally {
    deps.budget?.give(held);
  }
}

async function writeParts(
  deps: EnvdDeps,
  t: EnvdTarget,
  body: Readable,
  type: string,
  path: string | null,
  account: Awaited<ReturnType<typeof accountOf>>,
): Promise<Written[]> {
  let form: FormData;
  try {
    form = await new Response(Readable.toWeb(body) as ReadableStream, { headers: { 'content-type': type } }).formData();
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof SbxError) throw cause;
    throw err instanceof SbxError ? err : new SbxError('bad_request', 'the multipart body could not be read');
  }
  const files = form.getAll('file').filter((v): v is File => typeof v !== 'string');
  if (files.length === 0) throw new SbxError('bad_request', 'no `file` part in the multipart body');
  if (path && files.length > 1) throw new SbxError('bad_request', 'several files are written at their own names: leave out path');
  const out: Written[] = [];
  for (const f of files) {
    const name = path ?? f.name;
    if (!name) throw new SbxError('bad_request', 'a file part needs a path (its filename) when the query has none');
    const target = resolvePath(name, account);
    const bytes = new Uint8Array(await f.arrayBuffer());
    if (actsAs(account)) await writeAsUser(deps, t, account, target, bytes);
    else await deps.files.write(t.rec.id, target, bytes, undefined, t.caller);
    out.push(writtenOf(target));
  }
  return out;
}

function writtenOf(path: string): Written {
  return { name: path.split('/').pop() ?? path, type: 'file', path };
}

/**
 * E2B's signed URL check: `v1_` + unpadded base64 SHA-256 of `path:operation:username:token`
 * (`:expiration` appended when it has one, which must be in the future), compared in constant time.
 */
export function signatureMatches(q: URLSearchParams, operation: string, token: string, nowMs: number): boolean {
  const given = q.get('signature');
  if (!given) return false;
  const exp = q.get('signature_expiration');
  if (exp !== null && (!/^\d{1,12}$/.test(exp) || Number(exp) * 1000 <= nowMs)) return false;
  const raw = `${q.get('path') ?? ''}:${operation}:${q.get('username') ?? ''}:${token}${exp !== null ? `:${exp}` : ''}`;
  const want = Buffer.from(`v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`);
  const got = Buffer.from(given);
  return got.length === want.length && timingSafeEqual(got, want);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
