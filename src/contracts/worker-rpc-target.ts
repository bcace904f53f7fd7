/** The worker RPC's shared shapes: what every runtime method names, paths and catalog names. */
import { Type, type Static } from '@sinclair/typebox';

/** Every runtime method names its sandbox, provider and runtime. */
export const Target = {
  sandbox_id: Type.String({ minLength: 1, maxLength: 128 }),
  provider: Type.String({ minLength: 1, maxLength: 64 }),
  runtime_id: Type.String({ minLength: 1, maxLength: 256 }),
};
export const RpcTarget = Type.Object(Target);
export type RpcTarget = Static<typeof RpcTarget>;

export const Path = Type.String({ minLength: 1, maxLength: 4096 });
/** Snapshot and volume names (DESIGN §10). */
export const CatalogName = Type.String({ pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$' });
