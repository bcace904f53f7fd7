/**
 * Secrets (DESIGN.md §15) in the typed client: `client.secrets.set('API_TOKEN', {value, hosts})`,
 * `.list()`, `.get(name)`, `.update(name, …)`, `.remove(name)`. A value goes in and never comes back.
 * `owner_id` (admins only) addresses another owner's namespace.
 */
import type { Http } from './http.js';
import type { CreateSecretRequest, RequestOptions, Secret, UpdateSecretRequest } from './types.js';

const enc = encodeURIComponent;
type OwnerOptions = RequestOptions & { owner_id?: string };

export class SecretsApi {
  constructor(private readonly http: Http) {}

  /** The caller's secrets by name (admins: every owner's, or `owner_id`'s). */
  list(opts: OwnerOptions = {}): Promise<Secret[]> {
    return this.http.json('GET', '/api/v1/secrets', { signal: opts.signal, query: { owner_id: opts.owner_id } });
  }

  get(name: string, opts: OwnerOptions = {}): Promise<Secret> {
    return this.http.json('GET', `/api/v1/secrets/${enc(name)}`, { signal: opts.signal, query: { owner_id: opts.owner_id } });
  }

  create(body: CreateSecretRequest, opts: OwnerOptions = {}): Promise<Secret> {
    return this.http.json('POST', '/api/v1/secrets', { body, signal: opts.signal, query: { owner_id: opts.owner_id } });
  }

  /** A new value, hosts and/or allow_plain_http. */
  update(name: string, body: UpdateSecretRequest, opts: OwnerOptions = {}): Promise<Secret> {
    return this.http.json('PUT', `/api/v1/secrets/${enc(name)}`, { body, signal: opts.signal, query: { owner_id: opts.owner_id } });
  }

  remove(name: string, opts: OwnerOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', `/api/v1/secrets/${enc(name)}`, { signal: opts.signal, query: { owner_id: opts.owner_id } });
  }
}
