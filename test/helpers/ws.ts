/** A small WebSocket test client (the `ws` package) for the exec socket. */
import WebSocket from 'ws';

export interface WsMessage {
  type: string;
  data?: string;
  exit_code?: number;
  code?: string;
  message?: string;
  timed_out?: boolean;
  [k: string]: unknown;
}

export interface WsClient {
  ws: WebSocket;
  send(msg: unknown): void;
  /** The next server message (rejects after `ms`, or when the socket closed first). */
  next(ms?: number): Promise<WsMessage>;
  /** Every remaining message until the server closes. */
  rest(ms?: number): Promise<WsMessage[]>;
  /** Resolves with the close code once the socket closed. */
  closed: Promise<number>;
  /** Every message seen so far. */
  seen: WsMessage[];
}

/** A refused upgrade: the HTTP status and body the server answered with. */
export class UpgradeRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade refused with ${status}: ${body}`);
  }
}

export function wsUrl(base: string, path: string): string {
  return base.replace(/^http/, 'ws') + path;
}

export function openWs(base: string, path: string, headers: Record<string, string> = {}): Promise<WsClient> {
  const ws = new WebSocket(wsUrl(base, path), { headers });
  const queue: WsMessage[] = [];
  const seen: WsMessage[] = [];
  let wake: (() => void) | null = null;
  let isClosed = false;
  const closed = new Promise<number>((resolve) => {
    ws.on('close', (code) => {
      isClosed = true;
      wake?.();
      resolve(code);
    });
  });
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as WsMessage;
    queue.push(msg);
    seen.push(msg);
    wake?.();
  });
  const next = async (ms = 10_000): Promise<WsMessage> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = queue.shift();
      if (m) return m;
      if (isClosed) throw new Error('socket closed before the next message');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(t);
          wake = null;
          resolve();
        };
      });
    }
  };
  const rest = async (ms = 15_000): Promise<WsMessage[]> => {
    const timer = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`socket not closed within ${ms} ms`)), ms).unref());
    await Promise.race([closed, timer]);
    return queue.splice(0);
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () =>
      resolve({ ws, send: (msg) => ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg)), next, rest, closed, seen }),
    );
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, body)));
      res.on('error', () => reject(new UpgradeRefused(res.statusCode ?? 0, body)));
    });
    ws.once('error', reject);
  });
}

/** Opens, starts `start`, and returns the client. */
export async function startWs(
  base: string,
  id: string,
  start: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<WsClient> {
  const c = await openWs(base, `/api/v1/sandboxes/${id}/exec/ws`, headers);
  c.send({ type: 'start', ...start });
  return c;
}

/** stdout text of messages. */
export const stdoutOf = (msgs: WsMessage[]) =>
  msgs
    .filter((m) => m.type === 'stdout')
    .map((m) => m.data)
    .join('');
export const stderrOf = (msgs: WsMessage[]) =>
  msgs
    .filter((m) => m.type === 'stderr')
    .map((m) => m.data)
    .join('');
