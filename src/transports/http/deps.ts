import type { WarmPool } from '../../core/sandboxes/warm.js';
import type { ProcessService } from '../../core/sandboxes/processes.js';
import type { Idempotency } from '../../core/sandboxes/idempotency.js';
import type { JournalFeedStats } from '../../core/events/journal-feed.js';
import type { Replicas } from '../../core/replicas/replicas.js';
import type { Admission } from '../../core/admission/admission.js';
import type { QuotaService } from '../../core/admission/quotas.js';
import type { AuthSettings } from '../../core/auth/settings.js';
import type { RateLimitStats } from '../../core/admission/rate-limiter.js';
import type { EventBus } from '../../core/events/bus.js';
import type { OperationStats } from '../../core/observability/operations.js';
import type { AuditService } from '../../core/audit/audit.js';
import type { Clock } from '../../core/ports/index.js';
import type { StoreProbe } from '../../core/observability/store-health.js';
import type { ProviderRegistry } from '../../core/providers/registry.js';
import type { ExecService } from '../../core/sandboxes/exec.js';
import type { FileService } from '../../core/sandboxes/files.js';
import type { SandboxService } from '../../core/sandboxes/service.js';
import type { TemplateService } from '../../core/sandboxes/templates.js';
import type { LeaseService } from '../../core/scheduler/leases.js';
import type { RuntimeLocator } from '../../core/scheduler/locator.js';
import type { WorkerService } from '../../core/scheduler/workers.js';
import type { CoreSettings } from '../../core/settings.js';
import type { PoolStatusView } from '../../core/pool/slots.js';
import type { PreviewService } from '../../core/sandboxes/preview.js';
import type { PreviewStats } from '../shared/preview/proxy.js';
import type { InflightBudget } from './inflight.js';
import type { SecretService } from '../../core/secrets/service.js';

/** Event stream tuning; tests shorten the keep-alive and the slow-subscriber limits. */
export interface EventStreamOptions {
  /** Comment keep-alive interval (default 15 s). */
  keepAliveMs?: number;
  /** Events a subscriber may have waiting before it is dropped (default 1000). */
  maxBufferedEvents?: number;
  /** Bytes a subscriber may have waiting before it is dropped (default 4 MiB). */
  maxBufferedBytes?: number;
}

/** Everything the HTTP transport drives. Built by compose/. */
export interface HttpDeps {
  settings: CoreSettings;
  clock: Clock;
  /** Store health and read-only inventory (health, metrics, diagnostics); routes never see the Store. */
  storeProbe: StoreProbe;
  /** Worker lease renewal and listing. */
  leases: LeaseService;
  /** Admin audit history. */
  audit: AuditService;
  bus: EventBus;
  providers: ProviderRegistry;
  admission: Admission;
  /** Owner quotas (spec 4.4). */
  quotas: QuotaService;
  sandboxes: SandboxService;
  exec: ExecService;
  files: FileService;
  /** Warm pools (DESIGN.md §11), for diagnostics and metrics. */
  warm?: WarmPool;
  /** Background processes (DESIGN.md §10); absent: their routes answer 501. */
  processes?: ProcessService;
  templates: TemplateService;
  workers: WorkerService;
  /** Placement and where runtimes live (diagnostics read its last choice). */
  locator: RuntimeLocator;
  /** Process start, for uptime. */
  startedAt: number;
  /** Request body limit in bytes. */
  bodyLimit: number;
  /**
   * Bytes of request bodies and buffered exec output held at once (`server.max_inflight_mb`);
   * buildApp makes a 256 MiB one when none is given.
   */
  inflight?: InflightBudget;
  /** API keys, admin key, worker credentials (spec Part 5). */
  auth: AuthSettings;
  /** `server.cors_allowed_origins`; '*' allows any origin. */
  corsAllowedOrigins: string[];
  /** `server.ui`: serve the dashboard at /ui. */
  ui?: boolean;
  /** `server.mcp`: serve MCP over streamable HTTP at /mcp (behind the API key). */
  mcp?: boolean;
  /** `server.e2b` (default on): E2B's control-plane API under /e2b (DESIGN.md §14); false → 404 there. */
  e2b?: boolean;
  /** `server.allowed_hosts`: extra `Host` names the dev-box guard accepts while auth is off (DESIGN §3). */
  allowedHosts?: string[];
  /** Per operation and provider counts and latency (diagnostics `operations`). */
  operations?: OperationStats;
  /** API rate limiter, when configured (diagnostics `rate_limit`). */
  rateLimiter?: { stats(): RateLimitStats };
  /** Configured secret values: scrubbed from diagnostics, metrics and events as a last line of defence. */
  secrets?: string[];
  /** Pool mode (DESIGN §8): its shared runtimes and workspaces; absent when the pool is off. */
  pool?: { view(): Promise<PoolStatusView> };
  /** Installation secret that signs list cursors (DESIGN §13), shared by replicas through the store. */
  listCursorSecret: string;
  /** Egress gateway verdicts (DESIGN §10), counted for `sbx_egress_connections_total`. */
  egress?: { allowed: number; denied: number; injections?: number };
  /** Live preview (DESIGN §9): tokens, domains, and the proxy's traffic counters. */
  preview?: { service: PreviewService; stats: PreviewStats };
  /** This replica among replicas on one database (DESIGN §7): its id, the live ones, the leaders. */
  replicas?: Replicas;
  /** The shared event journal's reader, when replicas share the store. */
  journal?: { stats(): JournalFeedStats } | null;
  /** Idempotent spawns (DESIGN §10): keys in the store. */
  idempotency: Idempotency;
  /** Event stream tuning (read per request). */
  eventStream?: EventStreamOptions;
  /** Secrets (DESIGN.md §15); absent: their routes answer 501. */
  secretService?: SecretService;
}
