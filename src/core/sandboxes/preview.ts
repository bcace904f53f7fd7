/**
 * Live preview (spec 1, DESIGN.md §9): which sandbox port a preview host reaches, the per-sandbox
 * preview token, and the preview domain a sandbox object shows. The proxying itself is the
 * transport's (transports/shared/preview); this decides only what may be reached and where it is.
 */
import { createHmac } from 'node:crypto';
import { safeEqual } from '../auth/worker-credentials.js';
import { badRequest, notFound, SbxError, unavailable } from '../errors.js';
import type { PreviewUpstream, SandboxRecord } from '../ports/index.js';
import { ownerVisible, type Caller } from './caller.js';
import type { SandboxService } from './service.js';

export interface PreviewSettings {
  /** `server.preview_domain` ('' = previews off on this control plane). */
  domain: string;
  /** `server.preview_auth`: visitors need the sandbox's preview token. */
  auth: boolean;
  /** Installation secret the tokens are derived from (kept in the store, shared by replicas). */
  secret: string;
}

const GONE = new Set(['destroyed', 'expired']);

/** How long a runtime's preview address is reused, and how many are kept. */
const ADDRESS_TTL_MS = 2_000;
const ADDRESS_CACHE_MAX = 4_096;

export class PreviewService {
  private readonly addresses = new Map<string, { upstream: PreviewUpstream; at: number }>();

  constructor(
    private readonly sandboxes: SandboxService,
    readonly settings: PreviewSettings,
  ) {}

  /**
   * The sandbox's preview token: derived from the installation secret, so every replica and every
   * restart agrees on it without storing one per sandbox. Never logged; shown to owner and admins.
   */
  token(sandboxId: string): string {
    return createHmac('sha256', this.settings.secret).update(`preview:${sandboxId}`).digest('base64url').slice(0, 32);
  }

  /** Constant-time check of a visitor's token. */
  tokenMatches(sandboxId: string, given: string | undefined): boolean {
    return given !== undefined && safeEqual(given, this.token(sandboxId));
  }

  /** The token for the sandbox object: only with `preview_auth`, only to its owner or an admin. */
  tokenFor(rec: SandboxRecord, caller: Caller): string | undefined {
    if (!this.settings.auth) return undefined;
    return ownerVisible(rec.owner_id, caller) ? this.token(rec.id) : undefined;
  }

  /**
   * Where TCP `port` of a live sandbox is reached. Unknown, destroyed or expired → 404; a port
   * outside 1–65535 → 400; a sandbox that is not running → 502; a provider without previews → 501.
   */
  async upstream(sandboxId: string, port: number, signal?: AbortSignal): Promise<PreviewUpstream> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw badRequest(`port must be between 1 and 65535`);
    const { store, locator } = this.sandboxes.deps;
    let rec = await store.getSandbox(sandboxId);
    if (!rec || GONE.has(rec.state) || this.sandboxes.pastTtl(rec) || this.sandboxes.destroying(rec.id)) {
      throw notFound(`sandbox ${sandboxId} not found`);
    }
    // DESIGN.md §16: a preview wakes a paused sandbox only behind its token, so a scanner cannot.
    if (rec.state === 'paused') {
      if (!this.settings.auth)
        throw unavailable(`sandbox ${sandboxId} is paused; resume it (previews resume it only with server.preview_auth on)`);
      rec = await this.sandboxes.pauses.ensureRunning(rec);
    }
    this.sandboxes.pauses.activity.touch(rec.id);
    if (rec.state !== 'running' || !rec.runtime_id) throw new SbxError('bad_gateway', `sandbox ${sandboxId} is ${rec.state}, not running`);
    // The sandbox is checked on every request (a destroy is a 404 at once); where its port is
    // reached (a container's address: an engine round trip) is kept for a moment.
    const key = `${rec.provider}\0${rec.runtime_id}\0${port}`;
    const now = performance.now();
    const hit = this.addresses.get(key);
    if (hit && now - hit.at < ADDRESS_TTL_MS) return hit.upstream;
    const provider = await locator.provider(rec);
    if (!provider.previewUpstream) throw new SbxError('not_implemented', `provider ${rec.provider} cannot serve previews`);
    const upstream = await provider.previewUpstream(rec.runtime_id, port, signal);
    // Remote upstreams carry per-call credentials and request ids, a pool tenant's a verdict on its listener: never reused.
    if (upstream.path_prefix === undefined && !upstream.shared) {
      if (this.addresses.size >= ADDRESS_CACHE_MAX) this.addresses.clear();
      this.addresses.set(key, { upstream, at: now });
    }
    return upstream;
  }

  /**
   * The preview domain each sandbox object shows (spec 2.1): its worker's advertised domain for a
   * remote-owned sandbox, else `server.preview_domain`. One worker listing per call.
   */
  async domains(recs: readonly SandboxRecord[]): Promise<(rec: SandboxRecord) => string> {
    return this.sandboxes.deps.locator.previewDomains(recs, this.settings.domain);
  }
}
