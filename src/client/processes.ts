/** Background processes of a sandbox (DESIGN.md §10). */
import { SbxError } from '../contracts/errors.js';
import type { ProcessInfo, ProcessOutputChunk, ProcessStart } from '../contracts/processes.js';
import { bytesToBase64 } from './base64.js';
import type { Http } from './http.js';
import { parseNdjson } from './ndjson.js';
import type { RequestOptions } from './types.js';

export type { ProcessInfo, ProcessOutputChunk, ProcessStart };

const enc = encodeURIComponent;

export class ProcessesApi {
  constructor(private readonly http: Http) {}

  private base(id: string): string {
    return `/api/v1/sandboxes/${enc(id)}/processes`;
  }

  /** Starts a command that runs on after this call; its output is kept and read with `output`. */
  start(id: string, input: ProcessStart, opts: RequestOptions = {}): Promise<ProcessInfo> {
    return this.http.json('POST', this.base(id), { body: input, signal: opts.signal });
  }

  list(id: string, opts: RequestOptions = {}): Promise<ProcessInfo[]> {
    return this.http.json('GET', this.base(id), opts);
  }

  get(id: string, pid: string, opts: RequestOptions = {}): Promise<ProcessInfo> {
    return this.http.json('GET', `${this.base(id)}/${enc(pid)}`, opts);
  }

  /** Sends SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 to every process of the command. */
  signal(id: string, pid: string, signal: string, opts: RequestOptions = {}): Promise<ProcessInfo> {
    return this.http.json('POST', `${this.base(id)}/${enc(pid)}/signal`, { body: { signal }, signal: opts.signal });
  }

  /**
   * Writes to the stdin of a process started with `stdin: true` (text as UTF-8; bytes sent as
   * base64). A 429 `resource_limit` means 1 MiB of it is still unread: retry later.
   */
  async writeStdin(id: string, pid: string, data: string | Uint8Array, opts: RequestOptions = {}): Promise<void> {
    const body = typeof data === 'string' ? { data } : { data: bytesToBase64(data), encoding: 'base64' };
    await this.http.json('POST', `${this.base(id)}/${enc(pid)}/stdin`, { body, signal: opts.signal });
  }

  /** Closes the stdin of a process started with `stdin: true`: EOF after what was written. */
  async closeStdin(id: string, pid: string, opts: RequestOptions = {}): Promise<void> {
    await this.http.json('POST', `${this.base(id)}/${enc(pid)}/stdin/close`, { signal: opts.signal });
  }

  /** Resizes the terminal of a process started with `pty`. */
  async resize(id: string, pid: string, size: { cols: number; rows: number }, opts: RequestOptions = {}): Promise<void> {
    await this.http.json('POST', `${this.base(id)}/${enc(pid)}/resize`, { body: size, signal: opts.signal });
  }

  /** Kills it; answers once it ended (or after 10 s with the record as it is). */
  kill(id: string, pid: string, opts: RequestOptions = {}): Promise<ProcessInfo> {
    return this.http.json('DELETE', `${this.base(id)}/${enc(pid)}`, opts);
  }

  /**
   * Output from byte `offset` (0 = the start): `{stream, offset, data[, encoding: 'base64']}`
   * chunks, `{stream: 'truncated', offset}` where older bytes were dropped, and — once the process
   * has ended — `{stream: 'exit', exit_code, state}`. With `follow`, waits for more until the end.
   * A reader that reconnects passes the offset after its last byte and loses nothing.
   */
  async *output(
    id: string,
    pid: string,
    query: { offset?: number; follow?: boolean } = {},
    opts: RequestOptions = {},
  ): AsyncGenerator<ProcessOutputChunk> {
    const params = new URLSearchParams({ offset: String(query.offset ?? 0) });
    if (query.follow) params.set('follow', 'true');
    const path = `${this.base(id)}/${enc(pid)}/output?${params.toString()}`;
    const res = await this.http.send('GET', path, { signal: opts.signal });
    await this.http.check(res, 'GET', path);
    try {
      yield* parseNdjson<ProcessOutputChunk>(res.body);
    } catch (err) {
      if (opts.signal?.aborted || err instanceof SbxError) throw err;
      throw new SbxError('unavailable', `process output from ${this.http.baseUrl} broke off: ${(err as Error).message}`, {
        network: true,
        url: this.http.baseUrl,
      });
    } finally {
      res.body.cancel();
    }
  }
}
