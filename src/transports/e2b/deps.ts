import type { FastifyRequest } from 'fastify';
import type { AuthSettings } from '../../core/auth/settings.js';
import type { SecretService } from '../../core/secrets/service.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import type { SandboxService } from '../../core/sandboxes/service.js';
import type { TemplateService } from '../../core/sandboxes/templates.js';
import type { Clock } from '../../core/ports/index.js';
import type { CoreSettings } from '../../core/settings.js';

/**
 * What the E2B-compatible control plane (DESIGN.md §14) drives: the same core services as the
 * native API (no second code path). The HTTP app builds it from its own deps; the caller's owner
 * comes from the app's one rule (`callerOf`), so a sandbox made here has the owner it would have
 * on `/api/v1` with the same key and `X-User-ID`.
 */
export interface E2bDeps {
  settings: CoreSettings;
  clock: Clock;
  auth: AuthSettings;
  sandboxes: SandboxService;
  templates: TemplateService;
  /** Owner-scoped secrets (DESIGN.md §15): E2B's `Secret` and the secrets a create's network rules use; absent → 501. */
  secretService?: SecretService;
  /** Installation secret (shared by replicas through the store): signs list tokens, derives envd access tokens. */
  installationSecret: string;
  /** The caller of a request, as the native API derives it (X-User-ID, API key, address; admin credential). */
  callerOf(request: FastifyRequest): Caller;
}
