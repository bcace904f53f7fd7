/** Volumes (DESIGN.md §10) in the typed client: `client.volumes.create('data')`, `.list()`, `.remove('data')`. */
import type { Http } from './http.js';
import type { RequestOptions, Volume } from './types.js';

const enc = encodeURIComponent;

export class VolumesApi {
  constructor(private readonly http: Http) {}

  /** Volumes sorted by name, with their sizes (null where the provider cannot tell). */
  list(opts: RequestOptions = {}): Promise<Volume[]> {
    return this.http.json('GET', '/api/v1/volumes', opts);
  }

  /** Makes an empty volume on `provider` (default: the server's default provider). */
  create(name: string, opts: RequestOptions & { provider?: string } = {}): Promise<Volume> {
    const body = opts.provider !== undefined ? { name, provider: opts.provider } : { name };
    return this.http.json('POST', '/api/v1/volumes', { body, signal: opts.signal });
  }

  /** Deletes the volume and its data; `conflict` while a sandbox mounts it. */
  remove(name: string, opts: RequestOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', `/api/v1/volumes/${enc(name)}`, opts);
  }
}
