import { bounded, ShapeError, toSbxError } from './errors.js';
import { META_INSTALLATION, META_MANAGED, type ResolvedOptions } from './options.js';
import { restJson } from './transport.js';

/** What sbx reads of E2B's `Sandbox` / `SandboxDetail` / `ListedSandbox` objects. */
export interface SandboxRecord {
  sandboxID: string;
  envdAccessToken?: string;
  domain?: string | null;
  state?: string;
  metadata?: Record<string, string>;
}

export interface CreateSpec {
  metadata: Record<string, string>;
  envVars?: Record<string, string>;
  allowInternetAccess?: boolean;
}

/** Parses an answer; a shape that is not the documented one is a provider_error naming `what`. */
function parsed<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw toSbxError(err, what);
  }
}

function record(v: unknown): SandboxRecord {
  const id = (v as { sandboxID?: unknown } | null)?.sandboxID;
  if (typeof id !== 'string' || id.length === 0) throw new ShapeError('a sandbox without sandboxID');
  const o = v as Record<string, unknown>;
  const meta = o.metadata && typeof o.metadata === 'object' ? (o.metadata as Record<string, string>) : undefined;
  return {
    sandboxID: id,
    envdAccessToken: typeof o.envdAccessToken === 'string' ? o.envdAccessToken : undefined,
    domain: typeof o.domain === 'string' ? o.domain : null,
    state: typeof o.state === 'string' ? o.state : undefined,
    metadata: meta,
  };
}

/**
 * E2B's REST API (spec/openapi.yml in e2b-dev/infra): `X-API-Key` on every call; each call
 * bounded by the provider's request timeout.
 */
export class HostedApi {
  constructor(private readonly o: ResolvedOptions) {}

  private call(
    what: string,
    method: string,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    ms = this.o.timeoutMs,
  ): Promise<unknown> {
    return bounded(what, ms, signal, (s) =>
      restJson(this.o.fetch, 'api', method, `${this.o.baseUrl}${path}`, { 'X-API-Key': this.o.apiKey }, body, s),
    );
  }

  /** `POST /sandboxes` → 201 Sandbox. */
  async create(spec: CreateSpec, signal?: AbortSignal): Promise<SandboxRecord> {
    const body = {
      templateID: this.o.template,
      timeout: this.o.sandboxTimeoutS,
      metadata: spec.metadata,
      // envd then requires the returned access token on every call, as E2B's SDK asks by default.
      secure: true,
      ...(spec.envVars ? { envVars: spec.envVars } : {}),
      ...(spec.allowInternetAccess !== undefined ? { allow_internet_access: spec.allowInternetAccess } : {}),
    };
    // Creating boots a VM: twice the usual bound.
    const raw = await this.call('spawn', 'POST', '/sandboxes', body, signal, this.o.timeoutMs * 2);
    return parsed('spawn', () => record(raw));
  }

  /** `GET /sandboxes/{id}` → SandboxDetail, or null on 404. */
  async get(id: string, signal?: AbortSignal, what = 'status'): Promise<SandboxRecord | null> {
    try {
      const raw = await this.call(what, 'GET', `/sandboxes/${encodeURIComponent(id)}`, undefined, signal);
      return parsed(what, () => record(raw));
    } catch (err) {
      if ((err as { code?: string }).code === 'not_found') return null;
      throw err;
    }
  }

  /** `DELETE /sandboxes/{id}` → 204; a 404 is a sandbox already gone (true when it existed). */
  async kill(id: string, signal?: AbortSignal): Promise<boolean> {
    try {
      await this.call('destroy', 'DELETE', `/sandboxes/${encodeURIComponent(id)}`, undefined, signal);
      return true;
    } catch (err) {
      if ((err as { code?: string }).code === 'not_found') return false;
      throw err;
    }
  }

  /** `GET /sandboxes?metadata=…` → running sandboxes that carry sbx's labels (this installation's when it has an id). */
  async listOwn(signal?: AbortSignal, what = 'list runtimes'): Promise<SandboxRecord[]> {
    const filter = new URLSearchParams({
      [META_MANAGED]: 'true',
      ...(this.o.installationId ? { [META_INSTALLATION]: this.o.installationId } : {}),
    });
    const raw = await this.call(what, 'GET', `/sandboxes?metadata=${encodeURIComponent(filter.toString())}`, undefined, signal);
    const all = parsed(what, () => {
      if (!Array.isArray(raw)) throw new ShapeError('a sandbox list that is not an array');
      return raw.map(record);
    });
    // Filtered here too: a backend that ignores the query must not hand sbx other sandboxes.
    return all.filter(
      (r) => r.metadata?.[META_MANAGED] === 'true' && (!this.o.installationId || r.metadata?.[META_INSTALLATION] === this.o.installationId),
    );
  }
}
