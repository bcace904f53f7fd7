import type { Http } from './http.js';
import type { FileInfo, RequestOptions } from './types.js';

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
}
