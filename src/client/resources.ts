/** Resource groups of the client: templates, quotas, providers, workers (spec 4.3–4.6, 4.9). */
import { spawnHeaders, type Http } from './http.js';
import type {
  CreateTemplateRequest,
  HeartbeatRequest,
  Lease,
  OwnerQuota,
  OwnerUsage,
  ProviderDetail,
  ProviderListItem,
  QuotaInput,
  QuotaSummary,
  RequestOptions,
  Sandbox,
  SpawnOptions,
  Template,
  TemplateSpawnRequest,
  UpdateTemplateRequest,
  Worker,
  WorkerEventsRequest,
  WorkerSandboxSecrets,
} from './types.js';

const enc = encodeURIComponent;

export class TemplatesApi {
  constructor(private readonly http: Http) {}

  list(opts: RequestOptions = {}): Promise<Template[]> {
    return this.http.json('GET', '/api/v1/templates', opts);
  }

  get(name: string, opts: RequestOptions = {}): Promise<Template> {
    return this.http.json('GET', `/api/v1/templates/${enc(name)}`, opts);
  }

  /** 409 `conflict` when the name exists. */
  create(req: CreateTemplateRequest, opts: RequestOptions = {}): Promise<Template> {
    return this.http.json('POST', '/api/v1/templates', { body: req, signal: opts.signal });
  }

  /** Replaces every field of the template. */
  update(name: string, req: UpdateTemplateRequest, opts: RequestOptions = {}): Promise<Template> {
    return this.http.json('PUT', `/api/v1/templates/${enc(name)}`, { body: req, signal: opts.signal });
  }

  remove(name: string, opts: RequestOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', `/api/v1/templates/${enc(name)}`, opts);
  }

  spawn(name: string, req: TemplateSpawnRequest = {}, opts: SpawnOptions = {}): Promise<Sandbox> {
    return this.http.json('POST', `/api/v1/templates/${enc(name)}/spawn`, { body: req, signal: opts.signal, headers: spawnHeaders(opts) });
  }
}

/**
 * Owner quotas. With an admin key the admin aliases (`/api/v1/admin/quotas…`) are used, otherwise
 * the compatibility paths (`/api/v1/quotas…`).
 */
export class QuotasApi {
  constructor(private readonly http: Http) {}

  private p(suffix = ''): string {
    return `/api/v1${this.http.hasAdminKey ? '/admin' : ''}/quotas${suffix}`;
  }

  list(opts: RequestOptions = {}): Promise<OwnerQuota[]> {
    return this.http.json('GET', this.p(), opts);
  }

  summary(opts: RequestOptions = {}): Promise<QuotaSummary> {
    return this.http.json('GET', this.p('/summary'), opts);
  }

  get(owner: string, opts: RequestOptions = {}): Promise<OwnerQuota> {
    return this.http.json('GET', this.p(`/${enc(owner)}`), opts);
  }

  set(owner: string, quota: QuotaInput, opts: RequestOptions = {}): Promise<OwnerQuota> {
    return this.http.json('PUT', this.p(`/${enc(owner)}`), { body: quota, signal: opts.signal });
  }

  remove(owner: string, opts: RequestOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', this.p(`/${enc(owner)}`), opts);
  }

  usage(owner: string, opts: RequestOptions = {}): Promise<OwnerUsage> {
    return this.http.json('GET', this.p(`/${enc(owner)}/usage`), opts);
  }
}

/** Providers; admin aliases when an admin key is configured. */
export class ProvidersApi {
  constructor(private readonly http: Http) {}

  private p(suffix = ''): string {
    return `/api/v1${this.http.hasAdminKey ? '/admin' : ''}/providers${suffix}`;
  }

  list(opts: RequestOptions = {}): Promise<ProviderListItem[]> {
    return this.http.json('GET', this.p(), opts);
  }

  get(name: string, opts: RequestOptions = {}): Promise<ProviderDetail> {
    return this.http.json('GET', this.p(`/${enc(name)}`), opts);
  }

  /** Runs health checks now: provider name → healthy. */
  test(opts: RequestOptions = {}): Promise<Record<string, boolean>> {
    return this.http.json('POST', this.p('/test'), opts);
  }
}

export class WorkersApi {
  constructor(private readonly http: Http) {}

  list(opts: RequestOptions = {}): Promise<Worker[]> {
    return this.http.json('GET', '/api/v1/workers', opts);
  }

  get(id: string, opts: RequestOptions = {}): Promise<Worker> {
    return this.http.json('GET', `/api/v1/workers/${enc(id)}`, opts);
  }

  /** Admin registry repair: records a heartbeat on behalf of a worker. */
  heartbeat(id: string, body: HeartbeatRequest, opts: RequestOptions = {}): Promise<Worker> {
    return this.http.json('POST', `/api/v1/admin/workers/${enc(id)}/heartbeat`, { body, signal: opts.signal });
  }

  /** Admin: drains a worker (it refuses new spawns; its sandboxes keep answering); answers the worker. */
  drain(id: string, opts: RequestOptions = {}): Promise<Worker> {
    return this.http.json('POST', `/api/v1/admin/workers/${enc(id)}/drain`, opts);
  }

  /** Admin: removes a worker from the registry. */
  remove(id: string, opts: RequestOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', `/api/v1/admin/workers/${enc(id)}`, opts);
  }
}

/**
 * The worker-facing routes (spec 4.6): what a worker calls on its control plane, with the worker
 * credentials of the client (`worker: { id, token }`) and never a user or admin key. The path
 * worker id is the credential's id, since the server rejects any other.
 */
export class WorkerFacingApi {
  constructor(private readonly http: Http) {}

  /** Records a heartbeat of this worker; returns the updated worker. */
  async heartbeat(body: HeartbeatRequest, opts: RequestOptions = {}): Promise<Worker> {
    const { id } = this.http.workerCredentials();
    return this.http.json('POST', `/api/v1/worker/${enc(id)}/heartbeat`, { body, signal: opts.signal });
  }

  /** Reports events about this worker's own sandboxes (egress denials, DESIGN §10); others' are dropped and counted. */
  async events(body: WorkerEventsRequest, opts: RequestOptions = {}): Promise<{ accepted: number; rejected: number }> {
    this.http.workerCredentials();
    return this.http.json('POST', '/api/v1/worker/events', { body, signal: opts.signal });
  }

  /**
   * The bound secrets, with their values, of a sandbox this worker runs (DESIGN.md §15), for its
   * egress gateway; 403 for a sandbox placed elsewhere. Kept only in memory, at most a second.
   */
  async sandboxSecrets(sandboxId: string, opts: RequestOptions = {}): Promise<WorkerSandboxSecrets> {
    this.http.workerCredentials();
    return this.http.json('GET', `/api/v1/worker/sandboxes/${enc(sandboxId)}/secrets`, { signal: opts.signal });
  }

  /** Renews a lease this worker holds (`ttl` from now); 404 unknown, 409 expired or held by another. */
  async renewLease(resourceId: string, ttl: string, opts: RequestOptions = {}): Promise<{ lease: Lease }> {
    const { id } = this.http.workerCredentials();
    return this.http.json('POST', `/api/v1/worker/${enc(id)}/leases/${enc(resourceId)}/renew`, { body: { ttl }, signal: opts.signal });
  }
}
