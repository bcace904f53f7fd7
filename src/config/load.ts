/**
 * The one door configuration enters through. Sources, lowest precedence first: defaults,
 * `<home>/.sbx/config.yaml`, the working-directory file, `SVC_*` env, overrides (flags).
 * `file` / SBX_CONFIG names one file that replaces both file lookups.
 */
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { applyLayer, type LayerContext } from './apply.js';
import { defaultConfig } from './defaults.js';
import { readEnv } from './env.js';
import { ConfigError, Problems } from './errors.js';
import { ConfigFileError, findHomeFile, readConfigFile, searchCwdFile } from './files.js';
import {
  checkBlankSecrets,
  crossCheck,
  deriveAuthEnabled,
  expandPath,
  expandPaths,
  resolveSecretFiles,
  type ConfigNote,
} from './resolve.js';
import { SCHEMA } from './schema.js';
import type { DeepPartial, SbxConfig } from './types.js';

export interface LoadConfigOptions {
  /** Where the working-directory file is looked for and relative paths resolve (default: process.cwd()). */
  cwd?: string;
  /** Home directory for `~/.sbx/config.yaml` and `~` in paths (default: env HOME, then os.homedir()). */
  home?: string;
  /** Environment to read SVC_* and SBX_CONFIG from (default: process.env). */
  env?: Record<string, string | undefined>;
  /** One explicit config file (`--config`); a missing file is an error. */
  file?: string;
  /** Highest-precedence values, e.g. command-line flags. */
  overrides?: DeepPartial<SbxConfig>;
}

export interface LoadedConfig {
  config: SbxConfig;
  /** What contributed, lowest precedence first: `defaults`, file paths, `env (SVC_…)`, `overrides`. */
  sources: string[];
  /** How the config was read that `serve` says at start (auth switched on by a key, a key beside an explicit false). */
  notes: ConfigNote[];
}

/** Loads, merges and validates the configuration; throws ConfigError listing every problem. */
export async function loadConfig(opts: LoadConfigOptions = {}): Promise<LoadedConfig> {
  const env = opts.env ?? process.env;
  const cwd = resolve(opts.cwd ?? process.cwd());
  const home = opts.home ?? env.HOME ?? homedir();
  const problems = new Problems();
  const origin = new Map<string, string>();
  const config = defaultConfig();
  const sources = ['defaults'];
  const target = config as unknown as Record<string, unknown>;
  const layer = (raw: unknown, sourceOf: LayerContext['sourceOf']) => applyLayer(target, raw, SCHEMA, [], { problems, origin, sourceOf });

  const applyFile = async (filepath: string, via: string) => {
    try {
      const raw = await readConfigFile(filepath);
      sources.push(filepath);
      layer(raw, () => filepath);
    } catch (err) {
      if (!(err instanceof ConfigFileError)) throw err;
      problems.add(err.filepath, err.reason, via);
    }
  };

  const explicit = opts.file ?? (env.SBX_CONFIG ? env.SBX_CONFIG : undefined);
  if (explicit !== undefined) {
    await applyFile(expandPath(explicit, home, cwd), opts.file !== undefined ? '--config' : 'SBX_CONFIG');
  } else {
    const homeFile = findHomeFile(home);
    if (homeFile) await applyFile(homeFile, 'home directory');
    try {
      const found = await searchCwdFile(cwd);
      if (found) {
        sources.push(found.filepath);
        layer(found.raw, () => found.filepath);
      }
    } catch (err) {
      if (!(err instanceof ConfigFileError)) throw err;
      problems.add(err.filepath, err.reason, 'working directory');
    }
  }

  const fromEnv = readEnv(env, problems);
  if (fromEnv.used.length > 0) {
    sources.push(`env (${fromEnv.used.join(', ')})`);
    layer(fromEnv.raw, (key) => fromEnv.sources.get(key) ?? 'env');
  }

  if (opts.overrides && Object.keys(opts.overrides).length > 0) {
    sources.push('overrides');
    layer(opts.overrides, () => 'overrides');
  }

  expandPaths(config, home, cwd);
  // A provider's name is its config group's (DESIGN §12): `custom-http` is read as `custom_http`.
  if (config.providers.default === 'custom-http') config.providers.default = 'custom_http';
  resolveSecretFiles(config, origin, problems);
  checkBlankSecrets(config, origin, problems);
  const notes = deriveAuthEnabled(config, origin);
  crossCheck(config, origin, problems);
  if (!problems.empty) throw new ConfigError(problems.list);
  return { config, sources, notes };
}
