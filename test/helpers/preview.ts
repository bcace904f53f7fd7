/**
 * Live preview helpers: an HTTP server started inside a sandbox (busybox httpd with a CGI echo
 * script and a raw upgrade echo through `nc`), and requests sent to the proxy with a chosen Host.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { createServer, connect } from 'node:net';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** One request to `base` with `host` as its Host header. */
export function hostRequest(
  base: string,
  host: string,
  path = '/',
  opts: { method?: string; body?: Buffer; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path, method: opts.method ?? 'GET', headers: { ...opts.headers, host }, setHost: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error('request timed out')));
    req.end(opts.body);
  });
}

/** A raw upgrade (`Upgrade: echo`) through the proxy: sends `payload` after the 101 and returns what came back. */
export function upgradeEcho(
  base: string,
  host: string,
  payload: Buffer,
  headers: Record<string, string> = {},
): Promise<{ head: string; echoed: Buffer }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    let head: string | null = null;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`upgrade echo timed out (head: ${head}, ${buf.length} bytes)`));
    }, 20_000);
    sock.on('connect', () => {
      let text = `GET /tunnel HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n`;
      for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
      sock.write(`${text}\r\n`);
    });
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (head === null) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString('latin1');
        buf = buf.subarray(end + 4);
        if (!head.startsWith('HTTP/1.1 101')) {
          clearTimeout(timer);
          sock.destroy();
          return resolve({ head, echoed: buf });
        }
        sock.write(payload);
      }
      if (buf.length >= payload.length) {
        clearTimeout(timer);
        sock.destroy();
        resolve({ head, echoed: buf });
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** A TCP port free on this host now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** The CGI echo: method, a few forwarded headers, then the request body. */
export const CGI_ECHO = [
  '#!/bin/sh',
  "printf 'Content-Type: application/octet-stream\\r\\n'",
  'printf \'X-Method: %s\\r\\n\' "$REQUEST_METHOD"',
  'printf \'X-Saw-Forwarded-Host: %s\\r\\n\' "$HTTP_X_FORWARDED_HOST"',
  'printf \'X-Saw-Forwarded-Proto: %s\\r\\n\' "$HTTP_X_FORWARDED_PROTO"',
  'printf \'X-Saw-Api-Key: %s\\r\\n\' "$HTTP_X_API_KEY"',
  'printf \'X-Saw-Token: %s\\r\\n\' "$HTTP_X_SBX_PREVIEW_TOKEN"',
  'printf \'X-Saw-Cookie: %s\\r\\n\\r\\n\' "$HTTP_COOKIE"',
  'exec cat',
  '',
].join('\n');

export const UPGRADE_ECHO = [
  '#!/bin/sh',
  "cr=$(printf '\\r')",
  'while IFS= read -r line; do line=${line%"$cr"}; [ -z "$line" ] && break; done',
  "printf 'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n'",
  'exec cat',
  '',
].join('\n');

export const BIG = randomBytes(5 * 1024 * 1024);

/**
 * Serves `/workspace/www` of a sandbox with busybox httpd on 127.0.0.1:`port` through a streamed
 * exec of the API at `base`, for as long as the returned controller is not aborted.
 */
export function httpdInSandbox(base: string, id: string, port: number, headers: Record<string, string> = {}): AbortController {
  const stop = new AbortController();
  void fetch(`${base}/api/v1/sandboxes/${id}/exec`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ command: `exec busybox httpd -f -p 127.0.0.1:${port} -h .`, workdir: '/workspace/www', stream: true }),
    signal: stop.signal,
  }).catch(() => undefined);
  return stop;
}
