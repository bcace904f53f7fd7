/**
 * A remote command's events (DESIGN.md §7): `worker.exec_stream` as NDJSON envelopes, parsed line
 * by line as they arrive (never the whole body), or — when stdin is live, a terminal is asked for
 * or controls are given — the worker's `GET /rpc/exec/ws` with the API's WebSocket exec messages.
 * A body that ends without an exit, a garbage line or a dropped connection is `unavailable` at
 * once; aborting the signal closes the call, which kills the command on the worker.
 */
import WebSocket from 'ws';
import { RPC_EXEC_WS_PATH, RPC_LEASE_HEADER, type RpcLease } from '../../../contracts/worker-rpc.js';
import { AsyncQueue } from '../../../core/async-queue.js';
import { SbxError } from '../../../core/errors.js';
import type { ExecEvent, ExecSpec, WorkerRecord } from '../../../core/ports/index.js';
import { errorFrom, type RpcClient } from './rpc-client.js';

export interface ExecTarget {
  sandbox_id: string;
  provider: string;
  runtime_id: string;
}

/** Ping period of the interactive exec socket; two missed answers end it. */
const PING_EVERY_MS = 5_000;

/** Longest NDJSON line accepted from a worker (a chunk of output, base64). */
const MAX_LINE = 16 * 1024 * 1024;

function lost(w: WorkerRecord): SbxError {
  return new SbxError('unavailable', `lost the connection to worker ${w.id} during exec`);
}

function baseParams(t: ExecTarget, spec: ExecSpec): Record<string, unknown> {
  const p: Record<string, unknown> = { ...t, command: spec.command, args: spec.args, mode: spec.mode, env: spec.env, binary: true };
  if (spec.workdir !== undefined) p.workdir = spec.workdir;
  return p;
}

/** True when the command needs the interactive transport. */
export function needsSocket(spec: ExecSpec): boolean {
  return spec.tty !== undefined || spec.controls !== undefined || (spec.stdin !== undefined && !(spec.stdin instanceof Uint8Array));
}

export async function* execStream(
  rpc: RpcClient,
  w: WorkerRecord,
  t: ExecTarget,
  spec: ExecSpec,
  signal: AbortSignal,
  lease: RpcLease | null = null,
): AsyncGenerator<ExecEvent> {
  const params = baseParams(t, spec);
  if (spec.stdin instanceof Uint8Array && spec.stdin.byteLength > 0) params.stdin = Buffer.from(spec.stdin).toString('base64');
  const { id, body } = await rpc.stream(w, params, signal, lease);
  let buf = '';
  let exited = false;
  try {
    for await (const chunk of body) {
      buf += (chunk as Buffer).toString('utf8');
      if (buf.length > MAX_LINE) throw rpc.invalid(w);
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === '') continue;
        const ev = parseLine(rpc, w, id, line);
        // The worker's provider reported no exit status (DESIGN §12): the stream ends without one.
        if (ev === null) {
          exited = true;
          return;
        }
        if (ev.stream === 'exit') {
          exited = true;
          yield ev;
          return;
        }
        yield ev;
      }
    }
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    if (err instanceof SbxError) throw err;
    throw lost(w);
  } finally {
    if (!exited) body.destroy();
  }
  if (signal.aborted) throw signal.reason;
  throw lost(w);
}

function parseLine(rpc: RpcClient, w: WorkerRecord, id: string, line: string): ExecEvent | null {
  let env: {
    id?: unknown;
    result?: { stream?: unknown; data?: unknown; exit_code?: unknown };
    error?: { code?: unknown; message?: unknown };
  };
  try {
    env = JSON.parse(line) as typeof env;
  } catch {
    throw rpc.invalid(w);
  }
  if (!env || typeof env !== 'object' || env.id !== id) throw rpc.invalid(w);
  if (env.error) throw errorFrom(w, env.error);
  const r = env.result;
  if (r && (r.stream === 'stdout' || r.stream === 'stderr') && typeof r.data === 'string')
    return { stream: r.stream, data: Buffer.from(r.data, 'base64') };
  if (r && r.stream === 'exit' && typeof r.exit_code === 'number') return { stream: 'exit', exit_code: r.exit_code };
  if (r && r.stream === 'exit' && r.exit_code === null) return null;
  throw rpc.invalid(w);
}

type Item = { ev: ExecEvent } | { err: unknown };

/** The interactive exec over the worker's WebSocket. */
export async function* execSocket(
  rpc: RpcClient,
  w: WorkerRecord,
  t: ExecTarget,
  spec: ExecSpec,
  signal: AbortSignal,
  lease: RpcLease | null = null,
): AsyncGenerator<ExecEvent> {
  const base = rpc
    .rpcUrl(w)
    .replace(/\/rpc$/, '')
    .replace(/^http/, 'ws');
  const url = `${base}${RPC_EXEC_WS_PATH}?${new URLSearchParams({ ...t }).toString()}`;
  const tls = rpc.tls;
  // The sandbox's lease (DESIGN §7 "Fencing"): the upgrade has no envelope to carry it.
  const headers = { ...rpc.headers(w), ...(lease ? { [RPC_LEASE_HEADER]: JSON.stringify(lease) } : {}) };
  const socket = new WebSocket(url, { headers, handshakeTimeout: 10_000, maxPayload: 64 * 1024 * 1024, ...(tls ?? {}) });
  const items = new AsyncQueue<Item>();
  let done = false;
  const fail = (err: unknown) => {
    if (done) return;
    done = true;
    items.push({ err });
    items.end();
  };
  const onAbort = () => {
    socket.terminate();
    fail(signal.reason);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  const send = (msg: Record<string, unknown>) =>
    new Promise<void>((resolve) => (socket.readyState === WebSocket.OPEN ? socket.send(JSON.stringify(msg), () => resolve()) : resolve()));

  socket.on('unexpected-response', (_req, res) => {
    let text = '';
    res.on('data', (c: Buffer) => (text.length < 65536 ? (text += c.toString('utf8')) : undefined));
    res.on('end', () => {
      try {
        const env = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
        fail(env.error ? errorFrom(w, env.error) : rpc.invalid(w));
      } catch {
        fail(rpc.invalid(w));
      }
    });
  });
  // Pinged while open; a link that stops answering is lost within PING_EVERY_MS × 3.
  let alive = true;
  const pinger = setInterval(() => {
    if (socket.readyState !== WebSocket.OPEN) return;
    if (!alive) {
      socket.terminate();
      fail(lost(w));
      return;
    }
    alive = false;
    socket.ping();
  }, PING_EVERY_MS);
  pinger.unref();
  socket.on('pong', () => (alive = true));
  socket.on('message', () => (alive = true));
  socket.on('error', () => fail(lost(w)));
  socket.on('close', () => fail(lost(w)));
  socket.on('message', (data: Buffer, isBinary: boolean) => {
    if (done) return;
    let msg: { type?: unknown; data?: unknown; encoding?: unknown; exit_code?: unknown; code?: unknown; message?: unknown };
    try {
      if (isBinary) throw new Error('binary');
      msg = JSON.parse(data.toString('utf8')) as typeof msg;
    } catch {
      fail(rpc.invalid(w));
      return;
    }
    if ((msg.type === 'stdout' || msg.type === 'stderr') && typeof msg.data === 'string') {
      items.push({
        ev: { stream: msg.type, data: msg.encoding === 'base64' ? Buffer.from(msg.data, 'base64') : Buffer.from(msg.data, 'utf8') },
      });
    } else if (msg.type === 'exit' && (typeof msg.exit_code === 'number' || msg.exit_code === null)) {
      // null: the worker's provider reported no exit status (DESIGN §12); the iteration just ends.
      if (msg.exit_code !== null) items.push({ ev: { stream: 'exit', exit_code: msg.exit_code } });
      done = true;
      items.end();
    } else if (msg.type === 'error') {
      fail(errorFrom(w, { code: msg.code, message: msg.message }));
    } else {
      fail(rpc.invalid(w));
    }
  });
  socket.once('open', () => {
    void (async () => {
      const start: Record<string, unknown> = {
        type: 'start',
        command: spec.command,
        args: spec.args,
        mode: spec.mode,
        env: spec.env,
        binary: true,
      };
      if (spec.workdir !== undefined) start.workdir = spec.workdir;
      if (spec.tty) Object.assign(start, { tty: true, cols: spec.tty.cols, rows: spec.tty.rows });
      await send(start);
      if (spec.controls) void pumpControls(spec.controls, send, () => done);
      if (spec.stdin instanceof Uint8Array) {
        if (spec.stdin.byteLength > 0) await send({ type: 'stdin', data: Buffer.from(spec.stdin).toString('base64'), encoding: 'base64' });
      } else if (spec.stdin) {
        for await (const chunk of spec.stdin) {
          if (done) break;
          await send({ type: 'stdin', data: Buffer.from(chunk).toString('base64'), encoding: 'base64' });
        }
      }
      if (!done) await send({ type: 'stdin_eof' });
    })().catch((err: unknown) => fail(err));
  });

  try {
    for await (const item of items) {
      if ('err' in item) throw item.err;
      yield item.ev;
    }
  } finally {
    done = true;
    clearInterval(pinger);
    signal.removeEventListener('abort', onAbort);
    if (socket.readyState === WebSocket.OPEN) socket.close(1000);
    else socket.terminate();
  }
}

async function pumpControls(
  controls: NonNullable<ExecSpec['controls']>,
  send: (m: Record<string, unknown>) => Promise<void>,
  finished: () => boolean,
): Promise<void> {
  for await (const c of controls) {
    if (finished()) return;
    try {
      await send(c.type === 'resize' ? { type: 'resize', cols: c.cols, rows: c.rows } : { type: 'signal', signal: c.signal });
    } finally {
      if (c.type === 'resize') c.applied?.();
    }
  }
}
