/** Spawn flags shared by `spawn`, `admission` and `templates create|update`. */
import type { SpawnRequest } from '../../../client/types.js';
import { SbxError } from '../../../contracts/errors.js';
import type { OptionSpec } from '../spec.js';

export const RESOURCE_OPTIONS: readonly OptionSpec[] = [
  { flags: '--image <image>', description: 'runtime image' },
  { flags: '--provider <name>', description: 'provider (docker, proot, mock, …); default: the server default' },
  { flags: '--memory <mb>', description: 'memory limit in MB', kind: 'int' },
  { flags: '--vcpus <n>', description: 'virtual CPUs', kind: 'int' },
  { flags: '--ttl <duration>', description: 'time to live, e.g. 30m, 2h', kind: 'duration' },
  { flags: '--meta <key=value>', description: 'metadata label (repeatable)', kind: 'kv' },
  { flags: '--network <mode>', description: 'network: none (no network at all) or bridge; docker only (default: the server default)', choices: ['none', 'bridge'] },
];

export const OWNER_OPTION: OptionSpec = { flags: '--owner <id>', description: 'owner for quota attribution (X-User-ID / --user overrides it)' };

export interface ResourceFlags {
  image?: string;
  provider?: string;
  memory?: number;
  vcpus?: number;
  ttl?: string;
  meta?: Record<string, string>;
  owner?: string;
  network?: 'none' | 'bridge';
}

/** Spawn request from flags; unset flags are left out so server defaults apply. */
export function spawnRequest(f: ResourceFlags): SpawnRequest {
  const req: SpawnRequest = {};
  if (f.image !== undefined) req.image = f.image;
  if (f.provider !== undefined) req.provider = f.provider;
  if (f.memory !== undefined) req.memory_mb = f.memory;
  if (f.vcpus !== undefined) req.vcpus = f.vcpus;
  if (f.ttl !== undefined) req.ttl = f.ttl;
  if (f.meta !== undefined) req.metadata = f.meta;
  if (f.owner !== undefined) req.owner_id = f.owner;
  if (f.network !== undefined) req.network = f.network;
  return req;
}

/**
 * A spawn whose image cannot be pulled (no registry access on a fresh machine) says how to go on:
 * the fix, and `sbx doctor`, which lists the images the engine already has. The server's error
 * body names no local images; only the CLI adds this.
 */
export async function pullHint<T>(spawn: Promise<T>, fix: string): Promise<T> {
  try {
    return await spawn;
  } catch (err) {
    if (err instanceof SbxError && /could not be pulled/.test(err.message)) {
      throw new SbxError(err.code, `${err.message}; ${fix}; \`sbx doctor\` lists the images the engine has`, err.details);
    }
    throw err;
  }
}

/** The pull fix for a template spawn: the template's image is what to change. */
export function templateImageFix(template: string): string {
  return `edit the template's image to one the engine has (sbx templates update ${template} --image NAME)`;
}
