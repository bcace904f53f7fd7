import { isSbxError, notFound, SbxError } from '../../../core/errors.js';
import type { HostedApi, SandboxRecord } from './api.js';
import { bounded, ConnectError, HttpStatusError } from './errors.js';
import { ENVD_PORT, type ResolvedOptions } from './options.js';
import { connectStream, connectUnary, discard } from './transport.js';

/** How one sandbox's envd is reached: its base URL and the headers every call carries. */
interface EnvdConn {
  base: string;
  headers: Record<string, string>;
}

/** envd sends a keepalive event this often (seconds) on a quiet stream, so proxies keep it open (as E2B's SDK asks). */
const KEEPALIVE_S = 50;

/** Bound of a file transfer (upload or download), which may carry many megabytes. */
const TRANSFER_TIMEOUT_MS = 300_000;

/**
 * Client of E2B's in-sandbox daemon (envd, spec in e2b-dev/infra packages/envd/spec): Connect RPCs
 * `/process.Process/*` and `/filesystem.Filesystem/*`, and `GET/POST /files?path=&username=`.
 * Calls carry `X-Access-Token: <envdAccessToken>` when the sandbox has one, and the user as
 * `Authorization: Basic base64(user:)` as E2B's SDK sends it. Where a sandbox is reached and its
 * token are learnt from the create answer, or from `GET /sandboxes/{id}` after a restart.
 */
export class Envd {
  private readonly conns = new Map<string, EnvdConn>();

  constructor(
    private readonly o: ResolvedOptions,
    private readonly api: HostedApi,
  ) {}

  remember(rec: SandboxRecord): void {
    const base = this.o.envdUrl
      ? this.o.envdUrl(rec.sandboxID, ENVD_PORT)
      : `https://${ENVD_PORT}-${rec.sandboxID}.${rec.domain || this.o.envdDomain}`;
    const headers: Record<string, string> = { Authorization: `Basic ${Buffer.from(`${this.o.user}:`).toString('base64')}` };
    if (rec.envdAccessToken) headers['X-Access-Token'] = rec.envdAccessToken;
    this.conns.set(rec.sandboxID, { base: base.replace(/\/+$/, ''), headers });
  }

  forget(id: string): void {
    this.conns.delete(id);
  }

  private async conn(id: string, what: string, signal?: AbortSignal): Promise<EnvdConn> {
    const known = this.conns.get(id);
    if (known) return known;
    const rec = await this.api.get(id, signal, what);
    if (!rec) throw notFound(`${what}: the sandbox runtime is gone`);
    this.remember(rec);
    return this.conns.get(id)!;
  }

  /** After a failure that may mean "no such sandbox" (404, 502, connection refused): asks the API. */
  private async explain(id: string, raw: unknown, what: string): Promise<void> {
    const maybeGone =
      raw instanceof HttpStatusError ? [404, 502, 503].includes(raw.status) : !(raw instanceof ConnectError) && raw instanceof TypeError;
    if (!maybeGone) return;
    const rec = await this.api.get(id, undefined, what).catch(() => undefined);
    if (rec === null) {
      this.forget(id);
      throw notFound(`${what}: the sandbox runtime is gone`);
    }
  }

  /** Runs one envd call under a deadline, translating failures (a vanished sandbox is not_found). */
  async run<T>(
    id: string,
    what: string,
    signal: AbortSignal | undefined,
    fn: (c: EnvdConn, s: AbortSignal) => Promise<T>,
    ms = this.o.timeoutMs,
  ): Promise<T> {
    const c = await this.conn(id, what, signal);
    let raw: unknown;
    try {
      return await bounded(what, ms, signal, (s) =>
        fn(c, s).catch((err: unknown) => {
          raw = err;
          throw err;
        }),
      );
    } catch (err) {
      await this.explain(id, raw, what);
      throw err;
    }
  }

  unary(id: string, method: string, message: unknown, what: string, signal?: AbortSignal): Promise<unknown> {
    return this.run(id, what, signal, (c, s) => connectUnary(this.o.fetch, `${c.base}/${method}`, c.headers, message, s));
  }

  /**
   * Opens a server stream; the deadline covers the response headers only (a command may run
   * quietly for long), after that `signal` alone ends it.
   */
  async stream(id: string, method: string, message: unknown, what: string, signal: AbortSignal): Promise<AsyncGenerator<unknown>> {
    return this.run(id, what, signal, (c, s) => {
      // The headers' deadline must not end the body: the fetch gets the long-lived signal.
      return Promise.race([
        connectStream(
          this.o.fetch,
          `${c.base}/${method}`,
          { ...c.headers, 'Keepalive-Ping-Interval': String(KEEPALIVE_S) },
          message,
          signal,
        ),
        new Promise<never>((_, reject) => s.addEventListener('abort', () => reject(s.reason), { once: true })),
      ]);
    });
  }

  private filesUrl(c: EnvdConn, path: string): string {
    return `${c.base}/files?${new URLSearchParams({ path, username: this.o.user }).toString()}`;
  }

  /** `POST /files` with a multipart `file` part: creates parents, replaces the whole file. */
  async upload(id: string, path: string, content: Uint8Array, signal?: AbortSignal): Promise<void> {
    await this.run(
      id,
      'write file',
      signal,
      async (c, s) => {
        const form = new FormData();
        form.append('file', new Blob([content]), path.split('/').pop() || 'file');
        const res = await this.o.fetch(this.filesUrl(c, path), { method: 'POST', headers: c.headers, body: form, signal: s });
        await discard(res);
        if (!res.ok) throw new HttpStatusError(res.status, 'envd');
      },
      TRANSFER_TIMEOUT_MS,
    );
  }

  /**
   * `GET /files` as a stream of `size` bytes (the size from a stat just before): the deadline covers
   * the answer's headers; the body then ends with the caller's `return()`, its signal, or the file.
   */
  async openDownload(id: string, path: string, size: number, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal?.reason);
    if (signal?.aborted) ac.abort(signal.reason);
    else signal?.addEventListener('abort', onAbort, { once: true });
    const release = () => {
      signal?.removeEventListener('abort', onAbort);
      ac.abort();
    };
    let res: Response;
    try {
      res = await this.run(id, 'read file', signal, async (c, s) => {
        s.addEventListener('abort', () => ac.abort(s.reason), { once: true });
        const r = await this.o.fetch(this.filesUrl(c, path), { method: 'GET', headers: c.headers, signal: ac.signal });
        if (!r.ok || !r.body) {
          await discard(r);
          throw new HttpStatusError(r.status, 'envd');
        }
        return r;
      });
    } catch (err) {
      release();
      throw err;
    }
    const body = res.body as unknown as AsyncIterable<Uint8Array>;
    return (async function* () {
      let total = 0;
      try {
        for await (const chunk of body) {
          total += chunk.byteLength;
          if (total > size) throw new SbxError('provider_error', 'read file: the file grew while it was read');
          yield chunk;
        }
        if (total !== size) throw new SbxError('provider_error', 'read file: the file changed while it was read');
      } catch (err) {
        throw isSbxError(err) ? err : new SbxError('provider_error', 'read file: the transfer broke off');
      } finally {
        release();
      }
    })();
  }

  /** `GET /files`: the file's bytes, refused past `maxBytes` even when the size changed since a stat. */
  async download(id: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<Uint8Array> {
    return this.run(
      id,
      'read file',
      signal,
      async (c, s) => {
        const res = await this.o.fetch(this.filesUrl(c, path), { method: 'GET', headers: c.headers, signal: s });
        if (!res.ok || !res.body) {
          await discard(res);
          throw new HttpStatusError(res.status, 'envd');
        }
        const parts: Buffer[] = [];
        let total = 0;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          total += chunk.byteLength;
          if (maxBytes !== undefined && total > maxBytes) {
            await discard(res);
            throw new SbxError('payload_too_large', `file is over ${maxBytes} bytes; the limit is ${maxBytes}`);
          }
          parts.push(Buffer.from(chunk));
        }
        return new Uint8Array(Buffer.concat(parts));
      },
      TRANSFER_TIMEOUT_MS,
    );
  }
}
