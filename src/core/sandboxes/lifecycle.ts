/**
 * A spawn's auto-pause and what its TTL does (DESIGN.md §16), resolved from the request, the
 * template (already merged into the request) and the server defaults.
 */
import { parseDuration } from '../duration.js';
import { badRequest, SbxError } from '../errors.js';
import type { Provider } from '../ports/index.js';
import type { CoreSettings } from '../settings.js';

export interface Lifecycle {
  /** Idle ms before an auto-pause; null: never. */
  auto_pause_ms: number | null;
  on_expire: 'destroy' | 'pause';
}

/**
 * `auto_pause` (a duration; `0s` = never; absent: `defaults.auto_pause`) and `on_expire`
 * (`destroy` or `pause`). Pool sandboxes never pause (DESIGN.md §8): asking for it is 501, the
 * server default does not apply to them. A provider of this node that cannot pause refuses both
 * with 501 before anything is created.
 */
export function resolveLifecycle(
  input: { auto_pause?: string; on_expire?: string },
  defaults: CoreSettings['defaults'],
  pool: boolean,
  provider: Provider | null,
): Lifecycle {
  if (input.on_expire !== undefined && input.on_expire !== 'destroy' && input.on_expire !== 'pause')
    throw badRequest('on_expire must be "destroy" or "pause"');
  const on_expire = input.on_expire ?? 'destroy';
  let auto = input.auto_pause !== undefined ? parseDuration(input.auto_pause, 'auto_pause') : null;
  if (auto !== null && auto < 0) throw badRequest('auto_pause must not be negative');
  const asked = (auto !== null && auto > 0) || on_expire === 'pause';
  if (pool && asked)
    throw new SbxError('not_implemented', 'pool sandboxes share one runtime with other users: they cannot pause (auto_pause, on_expire)');
  if (auto === null && !pool) auto = defaults.auto_pause_ms ?? 0;
  const auto_pause_ms = auto !== null && auto > 0 ? auto : null;
  if ((auto_pause_ms !== null || on_expire === 'pause') && provider && !provider.pause) {
    if (asked) throw new SbxError('not_implemented', `provider ${provider.name} cannot pause sandboxes (auto_pause, on_expire: pause)`);
    return { auto_pause_ms: null, on_expire };
  }
  return { auto_pause_ms, on_expire };
}
