import { SbxError } from '../contracts/errors.js';
import type { Http } from './http.js';
import { parseNdjson } from './ndjson.js';
import type { FileInfo, RequestOptions, WatchEvent } from './types.js';

type Status<T extends string> = { status: T };

/** The eight file operations of spec 4.2 (paths are absolute inside the sandbox). */
export class FilesApi {
  constructor(private readonly http: Http) {}

  private base(id: string): string {
    return `/api/v1/sandboxes/${encodeURIComponent(id)}/files`;
  }

  /**
   * Writes a file. Strings travel as the spec's JSON form (utf8); bytes as a raw
   * `application/octet-stream` body with path and mode in the query (an sbx extension: no base64,
   * no JSON, any content is safe).
   */
  write(id: string, path: string, content: string | Uint8Array, opts: { mode?: string } & RequestOptions = {}): Promise<Status<'written'>> {
    if (typeof content === 'string') {
      const body = { path, content, encoding: 'utf8', ...(opts.mode ? { mode: opts.mode } : {}) };
      return this.http.json('POST', this.base(id), { body, signal: opts.signal });
    }
    return this.http.json('POST', this.base(id), { query: { path, mode: opts.mode || undefined }, bytes: content, signal: opts.signal });
  }

  /** Reads a file as raw bytes. */
  read(id: string, path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    return this.http.bytes('GET', this.base(id), { query: { path }, signal: opts.signal });
  }

  remove(id: string, path: string, opts: { recursive?: boolean } & RequestOptions = {}): Promise<Status<'deleted'>> {
    return this.http.json('DELETE', this.base(id), { query: { path, recursive: opts.recursive ? true : undefined }, signal: opts.signal });
  }

  list(id: string, path = '/', opts: RequestOptions = {}): Promise<FileInfo[]> {
    return this.http.json('GET', `${this.base(id)}/list`, { query: { path }, signal: opts.signal });
  }

  move(id: string, oldPath: string, newPath: string, opts: RequestOptions = {}): Promise<Status<'moved'>> {
    return this.http.json('POST', `${this.base(id)}/move`, { body: { old_path: oldPath, new_path: newPath }, signal: opts.signal });
  }

  chmod(id: string, path: string, mode: string, opts: RequestOptions = {}): Promise<Status<'chmod applied'>> {
    return this.http.json('POST', `${this.base(id)}/chmod`, { body: { path, mode }, signal: opts.signal });
  }

  stat(id: string, path: string, opts: RequestOptions = {}): Promise<FileInfo> {
    return this.http.json('GET', `${this.base(id)}/stat`, { query: { path }, signal: opts.signal });
  }

  glob(id: string, pattern: string, opts: RequestOptions = {}): Promise<string[]> {
    return this.http.json('GET', `${this.base(id)}/glob`, { query: { pattern }, signal: opts.signal });
  }

  /**
   * Watches a directory (sbx extension, DESIGN §16): its changes as they happen, until the signal
   * aborts, the sandbox goes, or an `overflow` (the last event). Refusals (404, 400, 429 for a 9th
   * watch, 501) throw before the first event; `onStart` runs once the watch is in place.
   */
  async *watch(
    id: string,
    path: string,
    opts: { recursive?: boolean; onStart?: () => void } & RequestOptions = {},
  ): AsyncGenerator<WatchEvent> {
    const url = `${this.base(id)}/watch`;
    const query = { path, recursive: opts.recursive === false ? false : undefined };
    const res = await this.http.send('GET', url, { query, signal: opts.signal, headers: { accept: 'application/x-ndjson' } });
    await this.http.check(res, 'GET', url);
    opts.onStart?.();
    try {
      yield* parseNdjson<WatchEvent>(res.body);
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (err instanceof SbxError) throw err;
      throw new SbxError('unavailable', `file watch stream broke off: ${(err as Error).message}`, { network: true });
    } finally {
      res.body.cancel();
    }
  }
}
