/** Wire helpers of the E2B stand-in (e2b-standin.ts): Connect errors, JSON answers, Go file modes, multipart. */
import type { Stats } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';

export class RpcError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
export const HTTP_OF: Record<string, number> = {
  not_found: 404,
  invalid_argument: 400,
  already_exists: 409,
  unauthenticated: 401,
  unimplemented: 501,
  internal: 500,
};

export async function readBody(req: IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > limit) throw new RpcError('invalid_argument', 'body too large');
    parts.push(c as Buffer);
  }
  return Buffer.concat(parts);
}

export function sendJson(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Go's os.FileMode of a POSIX st_mode, and its String(). */
export function goMode(st: Stats): { mode: number; permissions: string } {
  let m = st.mode & 0o777;
  if (st.isDirectory()) m |= 2 ** 31;
  if (st.isSymbolicLink()) m |= 1 << 27;
  if (st.mode & 0o4000) m |= 1 << 23;
  if (st.mode & 0o2000) m |= 1 << 22;
  if (st.mode & 0o1000) m |= 1 << 20;
  const letters = 'dalTLDpSugct?';
  let s = '';
  for (let i = 0; i < letters.length; i++) if (m & (2 ** (31 - i))) s += letters[i];
  const rwx = 'rwxrwxrwx';
  for (let i = 0; i < 9; i++) s += m & (1 << (8 - i)) ? rwx[i] : '-';
  return { mode: m >>> 0, permissions: s };
}

/** The first part of a multipart/form-data body (E2B's upload sends one `file` part). */
export function firstPart(body: Buffer, contentType: string): Buffer {
  const b = /boundary="?([^";]+)"?/.exec(contentType)?.[1];
  if (!b) throw new RpcError('invalid_argument', 'not multipart');
  const delim = Buffer.from(`--${b}`);
  const start = body.indexOf(delim);
  const headEnd = body.indexOf('\r\n\r\n', start);
  const end = body.indexOf(Buffer.from(`\r\n--${b}`), headEnd);
  if (start < 0 || headEnd < 0 || end < 0) throw new RpcError('invalid_argument', 'bad multipart body');
  return body.subarray(headEnd + 4, end);
}
