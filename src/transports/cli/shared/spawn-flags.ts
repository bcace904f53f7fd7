/** Spawn flags shared by `spawn`, `admission` and `templates create|update`. */
import type { SpawnRequest } from '../../../client/types.js';
import { SbxError } from '../../../contracts/errors.js';
import { UsageError } from '../errors.js';
import type { OptionSpec } from '../spec.js';

export const RESOURCE_OPTIONS: readonly OptionSpec[] = [
  { flags: '--image <image>', description: 'runtime image' },
  { flags: '--provider <name>', description: 'provider (docker, proot, mock, …); default: the server default' },
  { flags: '--memory <mb>', description: 'memory limit in MB', kind: 'int' },
  { flags: '--vcpus <n>', description: 'virtual CPUs', kind: 'int' },
  { flags: '--ttl <duration>', description: 'time to live, e.g. 30m, 2h', kind: 'duration' },
  { flags: '--meta <key=value>', description: 'metadata label (repeatable)', kind: 'kv' },
  {
    flags: '--network <mode>',
    description:
      'network: none (no network at all), bridge, or filtered (only what --allow lets through); docker only (default: the server default)',
    choices: ['none', 'bridge', 'filtered'],
  },
  {
    flags: '--allow <rule>',
    description: 'egress allow rule: host, *.name, IP or CIDR, optional :port (repeatable; implies --network filtered)',
    kind: 'list',
  },
  {
    flags: '--deny <rule>',
    description: 'egress deny rule, checked before the allow rules (repeatable; implies --network filtered)',
    kind: 'list',
  },
  { flags: '--snapshot <name>', description: 'start from this snapshot (its provider and image; see sbx snapshot)' },
  {
    flags: '--volume <name:/path>',
    description: 'mount a volume read-write at an absolute path (repeatable; see sbx volumes)',
    kind: 'list',
  },
  {
    flags: '--secret <name>',
    description:
      'bind a secret: $NAME holds a placeholder the egress gateway swaps for the value (repeatable; needs ' +
      '--network filtered; see sbx secrets)',
    kind: 'list',
  },
  { flags: '--auto-pause <duration>', description: 'pause after this long without activity, e.g. 10m (0s: never)', kind: 'duration' },
  {
    flags: '--on-expire <action>',
    description: 'what the TTL does: destroy (default), or pause (destroyed defaults.paused_ttl later unless resumed)',
    choices: ['destroy', 'pause'],
  },
];

export const OWNER_OPTION: OptionSpec = {
  flags: '--owner <id>',
  description: 'owner for quota attribution (X-User-ID / --user overrides it)',
};

export interface ResourceFlags {
  image?: string;
  provider?: string;
  memory?: number;
  vcpus?: number;
  ttl?: string;
  meta?: Record<string, string>;
  owner?: string;
  network?: 'none' | 'bridge' | 'filtered';
  allow?: string[];
  deny?: string[];
  snapshot?: string;
  volume?: string[];
  secret?: string[];
  autoPause?: string;
  onExpire?: 'destroy' | 'pause';
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
  if (f.allow !== undefined || f.deny !== undefined) req.egress = { allow: f.allow ?? [], deny: f.deny ?? [] };
  if (f.snapshot !== undefined) req.snapshot = f.snapshot;
  if (f.volume !== undefined) req.volumes = f.volume.map(volumeFlag);
  if (f.secret !== undefined) req.secrets = f.secret;
  if (f.autoPause !== undefined) req.auto_pause = f.autoPause;
  if (f.onExpire !== undefined) req.on_expire = f.onExpire;
  return req;
}

/** `NAME:/path` of `--volume` (the path is checked by the server). */
export function volumeFlag(raw: string): { name: string; mount_path: string } {
  const at = raw.indexOf(':');
  if (at <= 0 || at === raw.length - 1) throw new UsageError(`--volume takes NAME:/path, got ${JSON.stringify(raw)}`);
  return { name: raw.slice(0, at), mount_path: raw.slice(at + 1) };
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
