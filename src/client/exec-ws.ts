/**
 * The WebSocket exec of the client (DESIGN.md §3 "WebSocket exec"): live stdin, a terminal,
 * resize and signals. `ws` is imported on first use, so commands that never open a socket do not
 * load it.
 */
import type WebSocket from 'ws';
import type { ExecWsServerMessage, ExecWsStart } from '../contracts/exec.js';
import { SbxError } from '../contracts/errors.js';
import { errorFromBody, type Http } from './http.js';
import type { ExecInput } from './types.js';

/** What `execWs` starts: an exec request plus terminal fields; `stdin` here is sent first (stdin stays open). */
export type ExecWsInput = ExecInput & {
  /** Run in a terminal where the provider can (capability `tty`). */
  tty?: boolean;
  cols?: number;
  rows?: number;
};

/** A message from the server: output (base64 when marked `encoding`, see `binary`), then `exit` or `error` last. */
export type ExecWsMessage = ExecWsServerMessage;

/**
 * A running command over a WebSocket. Iterate it for output; the iteration ends after `exit` or
 * `error` (the server closes then), and throws `unavailable` when the connection drops first.
 */
export interface ExecSession extends AsyncIterable<ExecWsMessage> {
  /** Sends stdin bytes (text goes as utf8, bytes as base64); resolves once the socket took them. */
  write(data: string | Uint8Array): Promise<void>;
  /** End of stdin: the command reads EOF. */
  end(): void;
  /** New terminal size. */
  resize(cols: number, rows: number): void;
  /** A signal for the command: `SIGINT`, `SIGTERM`, `SIGKILL`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`. */
  signal(name: string): void;
  /** Closes the socket; the server kills a command still running. */
  close(): void;
}

export interface ExecWsOptions {
  /** Aborting closes the socket (the command is killed). */
  signal?: AbortSignal;
}

const CONNECT_TIMEOUT_MS = 10_000;

function startMessage(input: ExecWsInput): ExecWsStart {
  const { stdin, ...rest } = input;
  const msg: ExecWsStart = { type: 'start', ...rest };
  if (stdin !== undefined) {
    if (typeof stdin === 'string') {
      msg.stdin = stdin;
    } else {
      msg.stdin = Buffer.from(stdin.buffer, stdin.byteOffset, stdin.byteLength).toString('base64');
      msg.stdin_encoding = 'base64';
    }
  }
  return msg;
}

/** Opens the socket and sends `start`; HTTP refusals of the upgrade throw the mapped SbxError. */
export async function openExecSession(http: Http, path: string, input: ExecWsInput, opts: ExecWsOptions = {}): Promise<ExecSession> {
  if (!(globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node) {
    // A browser's WebSocket cannot carry the key headers; the dashboard opens its own socket with the
    // `sbx.key.<base64url>` subprotocol instead.
    throw new SbxError(
      'bad_request',
      'execWs needs Node (the ws package); in a browser open the WebSocket with the sbx.v1 and sbx.key.<base64url key> subprotocols',
    );
  }
  const { default: WS } = await import('ws');
  const url = http.url(path).replace(/^http/, 'ws');
  if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
  const ws: WebSocket = new WS(url, {
    headers: http.headersFor(path),
    perMessageDeflate: false,
    handshakeTimeout: CONNECT_TIMEOUT_MS,
    followRedirects: false,
  });

  const queue: ExecWsMessage[] = [];
  let wake: (() => void) | null = null;
  let closed = false;
  let ended = false; // exit or error seen
  let failure: SbxError | undefined;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onAbort = () => ws.terminate();
  opts.signal?.addEventListener('abort', onAbort, { once: true });

  await new Promise<void>((resolve, reject) => {
    const fail = (err: unknown) => {
      opts.signal?.removeEventListener('abort', onAbort);
      reject(err);
    };
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      const done = () => {
        fail(errorFromBody(res.statusCode ?? 0, Buffer.concat(parts).toString('utf8'), 'GET', path));
        ws.terminate();
      };
      res.once('end', done);
      res.once('error', done);
    });
    ws.once('error', (err) => fail(opts.signal?.aborted ? err : http.unreachable(err)));
  });

  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    let msg: ExecWsMessage;
    try {
      msg = JSON.parse(String(data)) as ExecWsMessage;
    } catch {
      failure ??= new SbxError('internal', 'malformed message from the exec socket');
      ws.terminate();
      return;
    }
    if (msg.type === 'exit' || msg.type === 'error') ended = true;
    queue.push(msg);
    notify();
  });
  ws.on('error', (err) => {
    if (!ended)
      failure ??= new SbxError('unavailable', `exec socket to ${http.baseUrl} failed: ${(err as Error).message}`, {
        network: true,
        url: http.baseUrl,
      });
  });
  ws.on('close', () => {
    closed = true;
    opts.signal?.removeEventListener('abort', onAbort);
    notify();
  });

  const sendJson = (msg: unknown): Promise<void> =>
    new Promise((resolve) => {
      if (ws.readyState !== ws.OPEN) return resolve();
      ws.send(JSON.stringify(msg), () => resolve());
    });
  void sendJson(startMessage(input));

  return {
    write(data) {
      if (typeof data === 'string') return sendJson({ type: 'stdin', data });
      return sendJson({
        type: 'stdin',
        data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
        encoding: 'base64',
      });
    },
    end() {
      void sendJson({ type: 'stdin_eof' });
    },
    resize(cols, rows) {
      void sendJson({ type: 'resize', cols, rows });
    },
    signal(name) {
      void sendJson({ type: 'signal', signal: name });
    },
    close() {
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(1000);
    },
    async *[Symbol.asyncIterator]() {
      try {
        for (;;) {
          const msg = queue.shift();
          if (msg) {
            yield msg;
            if (msg.type === 'exit' || msg.type === 'error') return;
            continue;
          }
          if (closed) {
            if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
            throw (
              failure ??
              new SbxError('unavailable', `exec socket to ${http.baseUrl} closed before the command ended`, {
                network: true,
                url: http.baseUrl,
              })
            );
          }
          await new Promise<void>((resolve) => (wake = resolve));
        }
      } finally {
        if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(1000);
      }
    },
  };
}
