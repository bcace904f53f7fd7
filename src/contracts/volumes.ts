import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

/** Names of snapshots and volumes (DESIGN.md §10), checked by core so a bad one gets a message naming the rule. */
const NAME_RULE =
  'snapshot and volume names: [a-z0-9][a-z0-9_.-]{0,63} (lower-case letters, digits, ".", "_", "-"); anything else is 400 bad_request';

/** A volume mounted into a sandbox (DESIGN.md §10). */
export const VolumeMount = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    mount_path: Type.String({ minLength: 1, maxLength: 4096, description: 'absolute, normalized, not / nor under /proc, /sys, /dev' }),
  },
  { additionalProperties: false },
);
export type VolumeMount = Static<typeof VolumeMount>;

export const VolumeMounts = Type.Array(VolumeMount, {
  maxItems: 16,
  description: 'sbx extension: volumes mounted read-write (at most 16)',
});

export const Volume = Type.Object(
  {
    name: Type.String(),
    provider: Type.String(),
    size_bytes: Type.Union([Type.Integer(), Type.Null()], {
      description: 'bytes stored; null when the provider cannot tell (docker before its disk-usage scan knows the volume)',
    }),
    created_at: Timestamp,
  },
  { $id: 'Volume' },
);
export type Volume = Static<typeof Volume>;

export const CreateVolumeRequest = Type.Object(
  {
    name: Type.String({ maxLength: 256, description: NAME_RULE }),
    provider: Type.Optional(Type.String({ minLength: 1, description: "default: the server's default provider" })),
  },
  { additionalProperties: false },
);
export type CreateVolumeRequest = Static<typeof CreateVolumeRequest>;

export const CreateSnapshotRequest = Type.Object(
  { name: Type.String({ maxLength: 256, description: NAME_RULE }) },
  { additionalProperties: false },
);
export type CreateSnapshotRequest = Static<typeof CreateSnapshotRequest>;
