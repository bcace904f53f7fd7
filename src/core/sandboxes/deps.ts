/** What the sandbox use-cases are built from: the ports and services compose hands to SandboxService. */
import type { Admission } from '../admission/admission.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, IdSource, SandboxStore, SnapshotStore, VolumeStore } from '../ports/index.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { RuntimeLocator } from '../scheduler/locator.js';
import type { SecretService } from '../secrets/service.js';
import type { CoreSettings } from '../settings.js';
import type { TeardownRetry } from './teardown.js';
import type { WarmPool } from './warm.js';

export interface SandboxDeps {
  /** Sandbox rows, snapshots and volumes: leases and workers are the locator's. */
  store: SandboxStore & SnapshotStore & VolumeStore;
  providers: ProviderRegistry;
  /** Where runtimes live: this node's providers or a remote worker (placement, leases). */
  locator: RuntimeLocator;
  admission: Admission;
  bus: EventBus;
  clock: Clock;
  ids: IdSource;
  settings: CoreSettings;
  /** Operator-facing warnings that no caller receives (compose passes the logger). */
  warn?: (fields: Record<string, unknown>, message: string) => void;
  /** The sandbox's preview token when previews need one (`server.preview_auth`), sent to its worker. */
  previewToken?: (sandboxId: string) => string | undefined;
  /** Warm runtimes to claim (DESIGN.md §11); set once the pool exists (it resolves shapes with this service). */
  warm?: WarmPool;
  /** Retry of a runtime's destroy (tests shorten it). */
  destroyRetry?: TeardownRetry;
  /** Secret bindings a fork gets, with placeholders of its own (DESIGN.md §15, §16); absent until secrets exist. */
  forkSecrets?: ForkSecretsHook;
  /** Secrets a spawn binds (DESIGN.md §15); absent: a spawn naming secrets answers 501. */
  secrets?: Pick<SecretService, 'plan' | 'record' | 'placeholderEnv'>;
}

/**
 * Where a fork's secret bindings are copied (DESIGN.md §15): the secrets service binds the
 * parent's secrets to the fork with placeholders of its own before the fork starts, and drops them
 * again when the fork could not be made.
 */
export interface ForkSecretsHook {
  copyBindings(parentId: string, childId: string, signal?: AbortSignal): Promise<void>;
  dropBindings(childId: string): Promise<void>;
}
