import { ConnectError, HttpStatusError, ShapeError, type Side } from './errors.js';

/**
 * HTTP plumbing of the hosted provider: JSON REST calls and Connect RPCs (connectrpc.com protocol,
 * JSON codec) as E2B's envd speaks them. Unary: `POST /<pkg.Service>/<Method>` with
 * `Content-Type: application/json` and `Connect-Protocol-Version: 1`, errors as a non-200 status
 * with a `{code, message}` body. Server streaming: `Content-Type: application/connect+json`, the
 * request and every message in a 5-byte envelope (flags byte, big-endian uint32 length), the last
 * envelope flagged 0x02 carrying `{error?: {code, message}}`.
 */

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Reads and drops a body so the connection can be reused; never throws. */
export async function discard(res: Response): Promise<void> {
  try {
    await res.body?.cancel();
  } catch {
    // Nothing to release.
  }
}

async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ShapeError('a body that is not JSON');
  }
}

/** A JSON REST call: the parsed body of a 2xx (undefined when empty), else HttpStatusError. */
export async function restJson(
  fetchFn: FetchLike,
  side: Side,
  method: string,
  url: string,
  headers: Record<string, string>,
  body: unknown,
  signal: AbortSignal,
): Promise<unknown> {
  const res = await fetchFn(url, {
    method,
    headers: { Accept: 'application/json', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal,
  });
  if (!res.ok) {
    await discard(res);
    throw new HttpStatusError(res.status, side);
  }
  return jsonOf(res);
}

function connectCodeOf(body: unknown): string | undefined {
  const code = (body as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A Connect unary call with the JSON codec. */
export async function connectUnary(
  fetchFn: FetchLike,
  url: string,
  headers: Record<string, string>,
  message: unknown,
  signal: AbortSignal,
): Promise<unknown> {
  const res = await fetchFn(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', ...headers },
    body: JSON.stringify(message),
    signal,
  });
  if (res.ok) return (await jsonOf(res)) ?? {};
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    const code = connectCodeOf(await jsonOf(res).catch(() => undefined));
    if (code) throw new ConnectError(code);
  } else {
    await discard(res);
  }
  throw new HttpStatusError(res.status, 'envd');
}

/** Wraps one JSON message in a Connect envelope (flags 0). */
export function envelope(message: unknown, flags = 0): Uint8Array {
  const payload = Buffer.from(JSON.stringify(message));
  const out = Buffer.alloc(5 + payload.length);
  out[0] = flags;
  out.writeUInt32BE(payload.length, 1);
  payload.copy(out, 5);
  return out;
}

/** Largest envelope accepted from a server (envd sends at most 32 KiB of output per message). */
const MAX_FRAME = 16 * 1024 * 1024;

/** Splits a byte stream into envelopes as they complete: {flags, message}. */
export async function* readEnvelopes(body: AsyncIterable<Uint8Array>): AsyncGenerator<{ flags: number; message: unknown }> {
  let buf = Buffer.alloc(0);
  for await (const chunk of body) {
    buf = buf.length === 0 ? Buffer.from(chunk) : Buffer.concat([buf, chunk]);
    while (buf.length >= 5) {
      const len = buf.readUInt32BE(1);
      if (len > MAX_FRAME) throw new ShapeError('an oversized stream frame');
      if (buf.length < 5 + len) break;
      const flags = buf[0]!;
      const raw = buf.subarray(5, 5 + len).toString('utf8');
      buf = buf.subarray(5 + len);
      let message: unknown;
      try {
        message = raw.length ? JSON.parse(raw) : {};
      } catch {
        throw new ShapeError('a stream frame that is not JSON');
      }
      yield { flags, message };
    }
  }
  if (buf.length > 0) throw new ShapeError('a truncated stream frame');
}

/**
 * Opens a Connect server stream. Resolves once the response headers came (a non-200 is an
 * HttpStatusError); the messages are then read from the returned iterator, which throws
 * ConnectError for an end-stream error and ShapeError when the stream ends without one.
 */
export async function connectStream(
  fetchFn: FetchLike,
  url: string,
  headers: Record<string, string>,
  message: unknown,
  signal: AbortSignal,
): Promise<AsyncGenerator<unknown>> {
  const res = await fetchFn(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1', ...headers },
    body: envelope(message),
    signal,
  });
  if (res.status !== 200 || !res.body) {
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('json') && !type.includes('connect+json')) {
      const code = connectCodeOf(await jsonOf(res).catch(() => undefined));
      if (code) throw new ConnectError(code);
    } else {
      await discard(res);
    }
    throw new HttpStatusError(res.status, 'envd');
  }
  const body = res.body as unknown as AsyncIterable<Uint8Array>;
  return (async function* () {
    let ended = false;
    try {
      for await (const { flags, message: m } of readEnvelopes(body)) {
        if (flags & 0x02) {
          ended = true;
          const code = connectCodeOf((m as { error?: unknown } | null)?.error);
          if (code) throw new ConnectError(code);
          return;
        }
        yield m;
      }
      if (!ended) throw new ShapeError('a stream that ended without its end frame');
    } finally {
      if (!ended) await discard(res);
    }
  })();
}
