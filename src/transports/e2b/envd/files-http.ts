import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createGunzip } from 'node:zlib';
import { SbxError } from '../../../core/errors.js';
import type { EnvdDeps } from './deps.js';
import { httpErrorOf } from './errors.js';
import { ACCESS_TOKEN_HEADER, type EnvdTarget, resolveTarget } from './target.js';
import { boundaryOf, multipartParts } from './multipart.js';
import { actsAs, writeAsUser } from './owner.js';
import { accountOf, resolvePath, userOf } from './users.js';

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

/**
 * `multipart/form-data`: each `file` part written as it arrives (multipart.ts streams it, nothing is
 * held whole), at the `path` query or else at its filename; other parts are read past.
 */
async function uploadMultipart(
  deps: EnvdDeps,
  t: EnvdTarget,
  body: AsyncIterable<Uint8Array>,
  type: string,
  path: string | null,
  account: Awaited<ReturnType<typeof accountOf>>,
): Promise<Written[]> {
  const out: Written[] = [];
  for await (const part of multipartParts(body, boundaryOf(type))) {
    if (part.name !== 'file') continue;
    if (path && out.length > 0) throw new SbxError('bad_request', 'several files are written at their own names: leave out path');
    const name = path ?? part.filename;
    if (!name) throw new SbxError('bad_request', 'a file part needs a path (its filename) when the query has none');
    const target = resolvePath(name, account);
    if (actsAs(account)) await writeAsUser(deps, t, account, target, part.body);
    else await deps.files.writeStream(t.rec.id, target, part.body, () => undefined, t.caller);
    out.push(writtenOf(target));
  }
  if (out.length === 0) throw new SbxError('bad_request', 'no `file` part in the multipart body');
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
