import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

/** Names of snapshots and volumes (DESIGN.md §10). */
export const CatalogName = Type.String({ pattern: '^[a-z0-9][a-z0-9_.-]{0,63}$', description: 'lower-case letters, digits, ".", "_", "-"; starts with a letter or digit; at most 64' });

/** A volume mounted into a sandbox (DESIGN.md §10). */
export const VolumeMount = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    mount_path: Type.String({ minLength: 1, maxLength: 4096, description: 'absolute, normalized, not / nor under /proc, /sys, /dev' }),
  },
  { additionalProperties: false },
);
export type VolumeMount = Static<typeof VolumeMount>;

export const VolumeMounts = Type.Array(VolumeMount, { maxItems: 16, description: 'sbx extension: volumes mounted read-write (at most 16)' });

export const Volume = Type.Object(
  {
    name: Type.String(),
    provider: Type.String(),
    size_bytes: Type.Union([Type.Integer(), Type.Null()], { description: 'bytes stored; null when the provider cannot tell (docker before its disk-usage scan knows the volume)' }),
    created_at: Timestamp,
  },
  { $id: 'Volume' },
);
export type Volume = Static<typeof Volume>;

export const CreateVolumeRequest = Type.Object(
  { name: Type.String({ maxLength: 256 }), provider: Type.Optional(Type.String({ minLength: 1 })) },
  { additionalProperties: false },
);
export type CreateVolumeRequest = Static<typeof CreateVolumeRequest>;

export const CreateSnapshotRequest = Type.Object({ name: Type.String({ maxLength: 256 }) }, { additionalProperties: false });
export type CreateSnapshotRequest = Static<typeof CreateSnapshotRequest>;
