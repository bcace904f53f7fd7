/** sbx configuration: one typed, validated tree from defaults, files, SVC_* env and flags. */
import { tryParseDuration } from '../shared/duration.js';

export type * from './types.js';
export { DEFAULTS, defaultConfig } from './defaults.js';
export { ConfigError } from './errors.js';
export { envName, ENV_PREFIX } from './env.js';
export { CWD_FILES, HOME_FILES } from './files.js';
export { loadConfig, type LoadConfigOptions, type LoadedConfig } from './load.js';
export { lintConfig, MIN_KEY_BYTES, type LintFinding, type LintOptions } from './lint.js';
export { expandPath } from './resolve.js';
export { REDACTED, redactConfig, secretValues } from './secrets.js';
export { SCHEMA, leafEntries } from './schema.js';

/** Milliseconds of a validated config duration (`30m` → 1800000); throws on a malformed one. */
export function durationMs(s: string): number {
  const ms = tryParseDuration(s);
  if (ms === null) throw new Error(`invalid duration ${JSON.stringify(s)}`);
  return ms;
}
