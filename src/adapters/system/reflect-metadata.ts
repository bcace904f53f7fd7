/**
 * The part of the Reflect metadata API that tsyringe (a dependency of @peculiar/x509) checks for
 * at load and uses: define, get and get-own metadata, and the `metadata` decorator factory. The
 * `reflect-metadata` package is not a dependency; this installs only what is missing, once,
 * before tls-ca.ts loads @peculiar/x509 (it calls installReflectMetadata first).
 */
type Key = string | symbol;
const store = new WeakMap<object, Map<string | symbol | undefined, Map<unknown, unknown>>>();

function own(target: object, prop: Key | undefined, create: boolean): Map<unknown, unknown> | undefined {
  let byProp = store.get(target);
  if (!byProp) {
    if (!create) return undefined;
    store.set(target, (byProp = new Map()));
  }
  let map = byProp.get(prop);
  if (!map && create) byProp.set(prop, (map = new Map()));
  return map;
}

const api = {
  defineMetadata(key: unknown, value: unknown, target: object, prop?: Key): void {
    own(target, prop, true)!.set(key, value);
  },
  getOwnMetadata(key: unknown, target: object, prop?: Key): unknown {
    return own(target, prop, false)?.get(key);
  },
  getMetadata(key: unknown, target: object, prop?: Key): unknown {
    for (let t: object | null = target; t; t = Object.getPrototypeOf(t)) {
      const map = own(t, prop, false);
      if (map?.has(key)) return map.get(key);
    }
    return undefined;
  },
  hasMetadata(key: unknown, target: object, prop?: Key): boolean {
    return api.getMetadata(key, target, prop) !== undefined;
  },
  metadata(key: unknown, value: unknown) {
    return (target: object, prop?: Key) => api.defineMetadata(key, value, target, prop);
  },
};

/** Installs what is missing (once; a real reflect-metadata, when loaded, stays). */
export function installReflectMetadata(): void {
  const R = Reflect as unknown as Record<string, unknown>;
  if (typeof R.getMetadata !== 'function') for (const [name, fn] of Object.entries(api)) R[name] ??= fn;
}
