/**
 * The gateway's wire helpers (DESIGN.md §10): refusals, request authorities,
 * source addresses, a buffered TLS ClientHello and the upstream connect (names are resolved in resolver.ts). Pure or socket-local; the
 * verdicts live in gateway.ts.
 */
import type { ServerResponse } from 'node:http';
import { connect, type Socket, type TcpNetConnectOpts } from 'node:net';
import { formatIp, type Ip } from '../../core/network/index.js';
import { MAX_HELLO_BYTES, parseClientHello } from './client-hello.js';

export function deny(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' });
  res.end(`${text}\n`);
}

/** A CONNECT refused before its tunnel: the answer, then the socket closed. */
export function refuseTunnel(sock: Socket, status: 400 | 403 | 502, text: string): void {
  if (!sock.writable) return void sock.destroy();
  const reason = status === 400 ? 'Bad Request' : status === 403 ? 'Forbidden' : 'Bad Gateway';
  const body = `${text}\r\n`;
  const head = `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\n`;
  sock.end(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/** `host[:port]` or `[v6][:port]`; the port 1–65535 without leading zeros. `defaultPort` null: required. */
export function splitAuthority(text: string, defaultPort: number | null): { host: string; port: number } | null {
  if (text === '' || text.includes('@')) return null;
  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return null;
    host = text.slice(0, close + 1);
    const rest = text.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return null;
      portText = rest.slice(1);
    }
  } else {
    const at = text.lastIndexOf(':');
    if (at >= 0 && text.indexOf(':') !== at) return null;
    host = at >= 0 ? text.slice(0, at) : text;
    portText = at >= 0 ? text.slice(at + 1) : undefined;
  }
  if (host === '' || host === '[]') return null;
  if (portText === undefined) return defaultPort === null ? null : { host, port: defaultPort };
  if (!/^[1-9][0-9]{0,4}$/.test(portText) || Number(portText) > 65535) return null;
  return { host, port: Number(portText) };
}

export function normalizeSource(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/** A buffered ClientHello: its bytes, server name and offered ALPN protocols (none: empty). */
export interface Hello {
  bytes: Buffer;
  sni: string | null;
  alpn: string[];
}

/** Reads until a whole ClientHello is buffered; null when the bytes are not one (or too slow). */
export function readHello(sock: Socket, initial: Buffer, timeoutMs: number): Promise<Hello | null> {
  return new Promise((resolve) => {
    let buf: Buffer<ArrayBufferLike> = initial;
    const finish = (v: Hello | null) => {
      clearTimeout(timer);
      sock.removeListener('data', onData);
      sock.removeListener('close', onClose);
      sock.pause();
      resolve(v);
    };
    const check = (): boolean => {
      const r = parseClientHello(buf);
      if (r.kind === 'hello') {
        finish({ bytes: buf, sni: r.sni, alpn: r.alpn ?? [] });
        return true;
      }
      if (r.kind === 'invalid' || buf.length > MAX_HELLO_BYTES) {
        finish(null);
        return true;
      }
      return false;
    };
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      check();
    };
    const onClose = () => finish(null);
    const timer = setTimeout(() => finish(null), timeoutMs);
    if (buf.length > 0 && check()) return;
    sock.on('data', onData);
    sock.once('close', onClose);
    sock.resume();
  });
}

/** Connects to the first address that answers, in order. */
export function connectFirst(
  addresses: Ip[],
  port: number,
  timeoutMs: number,
  /** More options of net.connect (the http relay's `onread`). */
  extra: Pick<TcpNetConnectOpts, 'onread'> = {},
): Promise<{ sock: Socket; address: Ip }> {
  return new Promise((resolve, reject) => {
    const attempt = (i: number) => {
      if (i >= addresses.length) return reject(new Error('no address answered'));
      const address = addresses[i]!;
      const sock = connect({ host: formatIp(address), port, family: address.family, ...extra });
      const timer = setTimeout(() => sock.destroy(new Error('connect timeout')), timeoutMs);
      sock.once('connect', () => {
        clearTimeout(timer);
        sock.removeAllListeners('error');
        resolve({ sock, address });
      });
      sock.once('error', () => {
        clearTimeout(timer);
        sock.destroy();
        attempt(i + 1);
      });
    };
    attempt(0);
  });
}
