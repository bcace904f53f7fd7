import type { Admission } from '../../core/admission/admission.js';
import type { EventBus } from '../../core/events/bus.js';
import type { Clock, Store } from '../../core/ports.js';
import type { ProviderRegistry } from '../../core/providers/registry.js';
import type { ExecService } from '../../core/sandboxes/exec.js';
import type { FileService } from '../../core/sandboxes/files.js';
import type { SandboxService } from '../../core/sandboxes/service.js';
import type { TemplateService } from '../../core/sandboxes/templates.js';
import type { WorkerService } from '../../core/scheduler/workers.js';
import type { CoreSettings } from '../../core/settings.js';

/** Everything the HTTP transport drives. Built by compose/. */
export interface HttpDeps {
  settings: CoreSettings;
  clock: Clock;
  store: Store;
  bus: EventBus;
  providers: ProviderRegistry;
  admission: Admission;
  sandboxes: SandboxService;
  exec: ExecService;
  files: FileService;
  templates: TemplateService;
  workers: WorkerService;
  /** Process start, for uptime. */
  startedAt: number;
  /** Request body limit in bytes. */
  bodyLimit: number;
}
