/**
 * The request layer of the custom HTTP provider: one keep-alive undici Agent, the API key on
 * every request, a deadline on every wait (connect, headers, body idle), retries with backoff for
 * idempotent calls only, and every failure as an SbxError whose message is sbx's own: a backend's
 * body text, the API key and URL credentials never reach it.
 */
import type { TSchema, Static } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { Agent, request, type Dispatcher } from 'undici';
import { CUSTOM_HTTP_KEY_HEADER, STATUS_CODES } from '../../../contracts/custom-http.js';
import { SbxError, type ErrorCode } from '../../../core/errors.js';

export interface HttpOptions {
  baseUrl: string;
  apiKey?: string;
  /** Bounds connect, headers and (idle) body waits of every call, and all attempts of a retried one. */
  timeoutMs: number;
  /** Attempts after the first for idempotent calls (default 2). */
  retries?: number;
  /** First backoff (default 100 ms), doubled per attempt, at most 1 s. */
  backoffMs?: number;
}

export interface CallOptions {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  body?: Uint8Array;
  /** Safe to repeat: retried on connection failures and 502/503/504. */
  idempotent?: boolean;
  signal?: AbortSignal;
  /** What the call does, for messages (`read file`). */
  what: string;
  /** Statuses returned to the caller instead of thrown (e.g. 404 of a status call). */
  pass?: number[];
  /** Body idle timeout; 0 = none (a silent command's exec stream). Default: the timeout. */
  bodyTimeoutMs?: number;
  /** Keep the deadline after the headers arrive (small JSON answers); false for streamed bodies. */
  wholeDeadline?: boolean;
  /**
   * No deadline of the call's own, for headers or body: it lasts as long as the caller's signal
   * allows (a buffered exec answers when its command ends; core's exec deadline bounds it).
   */
  untimed?: boolean;
  accept?: string;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData['body'];
  /** Ends the call's deadline timer (streamed bodies take over with the body idle timeout). */
  done(): void;
  /** Aborted when the call's deadline passed. */
  deadline: AbortSignal;
}

const RETRY_STATUS = new Set([502, 503, 504]);
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const DEADLINE = Symbol('deadline');

const checks = new WeakMap<TSchema, TypeCheck<TSchema>>();
function checker(schema: TSchema): TypeCheck<TSchema> {
  let c = checks.get(schema);
  if (!c) checks.set(schema, (c = TypeCompiler.Compile(schema)));
  return c;
}

/** The origin without credentials, path kept: what messages and config() may show. */
export function publicUrl(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return '(invalid url)';
  }
}

/** Releases a body that will not be read (its connection is closed); no unhandled error follows. */
export function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

export class HttpCaller {
  readonly agent: Agent;
  private readonly base: URL;
  private readonly where: string;

  constructor(private readonly opts: HttpOptions) {
    let base: URL;
    try {
      base = new URL(opts.baseUrl);
    } catch {
      throw new Error('providers.custom_http.base_url is not a URL');
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:')
      throw new Error('providers.custom_http.base_url must be http:// or https://');
    this.base = base;
    this.where = publicUrl(opts.baseUrl);
    this.agent = new Agent({
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 60_000,
      connect: { timeout: Math.min(opts.timeoutMs, 10_000) },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  }

  get timeoutMs(): number {
    return this.opts.timeoutMs;
  }

  error(code: ErrorCode, what: string, detail: string): SbxError {
    return new SbxError(code, `custom-http ${what}: ${detail}`);
  }

  private url(path: string, query?: CallOptions['query']): URL {
    const u = new URL(this.base.toString());
    u.pathname = `${u.pathname.replace(/\/$/, '')}${path}`;
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  /** Sends one call (retrying when allowed); a status outside 2xx and `pass` throws its typed error. */
  async call(c: CallOptions): Promise<Answer> {
    // `timeout` is aborted by the deadline alone; `ac` (what undici sees) by the deadline or the caller.
    const timeout = new AbortController();
    const ac = new AbortController();
    const signal = ac.signal;
    const timer = c.untimed ? undefined : setTimeout(() => (timeout.abort(DEADLINE), ac.abort(DEADLINE)), this.opts.timeoutMs);
    const onCaller = () => ac.abort(c.signal!.reason);
    if (c.signal?.aborted) onCaller();
    else c.signal?.addEventListener('abort', onCaller, { once: true });
    // The caller's abort reaches the request until its body is closed.
    const unlink = () => c.signal?.removeEventListener('abort', onCaller);
    const done = () => clearTimeout(timer);
    const attempts = 1 + (c.idempotent ? (this.opts.retries ?? 2) : 0);
    try {
      for (let attempt = 1; ; attempt++) {
        let res: Dispatcher.ResponseData;
        try {
          res = await request(this.url(c.path, c.query), {
            dispatcher: this.agent,
            method: c.method,
            headers: this.headers(c),
            body: c.json !== undefined ? JSON.stringify(c.json) : c.body,
            signal,
            bodyTimeout: c.bodyTimeoutMs ?? (c.untimed ? 0 : this.opts.timeoutMs),
            headersTimeout: c.untimed ? 0 : this.opts.timeoutMs,
          });
        } catch (err) {
          const mapped = this.failure(err, c, timeout.signal);
          if (attempt < attempts && mapped instanceof SbxError && mapped.code === 'unavailable' && !signal.aborted) {
            try {
              await this.backoff(attempt, signal);
            } catch (e) {
              throw this.failure(e, c, timeout.signal);
            }
            continue;
          }
          throw mapped;
        }
        // Readers see failures through their own iteration; a body nobody reads never crashes the process.
        res.body.on('error', () => undefined);
        res.body.once('close', unlink);
        if (res.statusCode >= 200 && res.statusCode < 300) {
          if (c.wholeDeadline === false) done();
          return { status: res.statusCode, headers: res.headers, body: res.body, done, deadline: timeout.signal };
        }
        if (c.pass?.includes(res.statusCode)) {
          return { status: res.statusCode, headers: res.headers, body: res.body, done, deadline: timeout.signal };
        }
        // The body is never read into a message: drop it (bounded) and keep the connection when cheap.
        res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        if (attempt < attempts && RETRY_STATUS.has(res.statusCode)) {
          try {
            await this.backoff(attempt, signal);
          } catch (err) {
            throw this.failure(err, c, timeout.signal);
          }
          continue;
        }
        throw this.statusError(res.statusCode, c.what);
      }
    } catch (err) {
      done();
      unlink();
      throw err;
    }
  }

  /** A call whose 2xx body is JSON of `schema`, read within the deadline; anything else is provider_error. */
  async json<S extends TSchema>(c: CallOptions, schema: S, limit?: number): Promise<Static<S>> {
    const a = await this.call(c);
    try {
      return this.parse(await this.readText(a, c, limit), schema, c.what);
    } finally {
      a.done();
    }
  }

  /** A call whose body is ignored (2xx is the answer). */
  async send(c: CallOptions): Promise<number> {
    const a = await this.call(c);
    try {
      await a.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      return a.status;
    } finally {
      a.done();
    }
  }

  parse<S extends TSchema>(text: string, schema: S, what: string): Static<S> {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw this.error('provider_error', what, 'the backend answered something that is not JSON');
    }
    if (!checker(schema).Check(value)) throw this.error('provider_error', what, 'the backend answered JSON of an unexpected shape');
    return value as Static<S>;
  }

  /** A small body as text, at most 16 MiB. */
  async readText(a: Answer, c: CallOptions, limit = 16 * 1024 * 1024): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of a.body) {
        size += (chunk as Buffer).length;
        if (size > limit) throw this.error('provider_error', c.what, 'the backend answered more than expected');
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      discard(a.body);
      if (err instanceof SbxError) throw err;
      throw this.failure(err, c, a.deadline);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  statusError(status: number, what: string): SbxError {
    const code = (STATUS_CODES[status] ?? 'provider_error') as ErrorCode;
    if (status === 401) return this.error('provider_error', what, 'the backend refused the API key (401)');
    return this.error(code, what, `the backend answered ${status}`);
  }

  /** A transport failure as a typed error: the caller's abort stays the caller's; our deadline is `timeout`. */
  failure(err: unknown, c: CallOptions, deadline?: AbortSignal): unknown {
    if (err instanceof SbxError) return err;
    if (c.signal?.aborted) return c.signal.reason ?? err;
    const code = (err as { code?: string }).code;
    if (deadline?.aborted || (code !== undefined && TIMEOUT_CODES.has(code))) {
      return this.error('timeout', c.what, `the backend did not answer within ${this.opts.timeoutMs} ms`);
    }
    return this.error('unavailable', c.what, `cannot reach the backend at ${this.where}`);
  }

  private headers(c: CallOptions): Record<string, string> {
    const h: Record<string, string> = { accept: c.accept ?? 'application/json' };
    if (this.opts.apiKey) h[CUSTOM_HTTP_KEY_HEADER] = this.opts.apiKey;
    if (c.json !== undefined) h['content-type'] = 'application/json';
    else if (c.body !== undefined) h['content-type'] = 'application/octet-stream';
    return h;
  }

  private backoff(attempt: number, signal: AbortSignal): Promise<void> {
    const ms = Math.min(1_000, (this.opts.backoffMs ?? 100) * 2 ** (attempt - 1));
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const t = setTimeout(() => (signal.removeEventListener('abort', onAbort), resolve()), ms);
      const onAbort = () => (clearTimeout(t), reject(signal.reason));
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}
