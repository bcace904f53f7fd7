/**
 * Every command of `sbx`, in help order. Command modules are small data + handler files; the heavy
 * parts (undici, ink, the server stack) load inside the handlers.
 */
import { admissionCommand } from './commands/admission.js';
import { completionCommand } from './commands/completion.js';
import { configCommand } from './commands/config.js';
import { doctorCommand } from './commands/doctor.js';
import { execCommand } from './commands/exec.js';
import { extendCommand } from './commands/extend.js';
import { pauseCommand, resumeCommand } from './commands/pause.js';
import { egressCommand } from './commands/egress.js';
import { filesCommand } from './commands/files.js';
import { getCommand } from './commands/get.js';
import { killCommand } from './commands/kill.js';
import { logsCommand } from './commands/logs.js';
import { lsCommand } from './commands/ls.js';
import { mcpCommand } from './commands/mcp.js';
import { poolCommand } from './commands/pool.js';
import { psCommand } from './commands/ps.js';
import { previewCommand } from './commands/preview.js';
import { providerServerCommand } from './commands/provider-server.js';
import { providersCommand } from './commands/providers.js';
import { quotaCommand } from './commands/quota.js';
import { rmCommand } from './commands/rm.js';
import { serveCommand } from './commands/serve.js';
import { shellCommand } from './commands/shell.js';
import { snapshotCommand } from './commands/snapshot.js';
import { forkCommand } from './commands/fork.js';
import { snapshotsCommand } from './commands/snapshots.js';
import { spawnCommand } from './commands/spawn.js';
import { templatesCommand } from './commands/templates.js';
import { volumesCommand } from './commands/volumes.js';
import { secretsCommand } from './commands/secrets.js';
import { watchCommand } from './commands/watch.js';
import { workerCommand } from './commands/worker.js';
import { workersCommand } from './commands/workers.js';
import type { CommandSpec } from './spec.js';

export const COMMANDS: readonly CommandSpec[] = [
  spawnCommand,
  lsCommand,
  getCommand,
  rmCommand,
  extendCommand,
  pauseCommand,
  resumeCommand,
  egressCommand,
  execCommand,
  shellCommand,
  filesCommand,
  logsCommand,
  psCommand,
  killCommand,
  previewCommand,
  templatesCommand,
  snapshotCommand,
  forkCommand,
  snapshotsCommand,
  volumesCommand,
  secretsCommand,
  admissionCommand,
  quotaCommand,
  providersCommand,
  poolCommand,
  workersCommand,
  watchCommand,
  mcpCommand,
  doctorCommand,
  serveCommand,
  workerCommand,
  providerServerCommand,
  configCommand,
  completionCommand,
];

/** Depth-first list of every command with its full path (`['files', 'put']`). */
export function allCommands(
  commands: readonly CommandSpec[] = COMMANDS,
  prefix: string[] = [],
): Array<{ path: string[]; spec: CommandSpec }> {
  return commands.flatMap((spec) => [
    { path: [...prefix, spec.name], spec },
    ...allCommands(spec.subcommands ?? [], [...prefix, spec.name]),
  ]);
}
