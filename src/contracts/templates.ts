import { Type, type Static } from '@sinclair/typebox';
import { Duration, MAX_INT32, StringMap, Timestamp } from './common.js';
import { AutoPause, Egress, EgressLists, Network, OnExpire } from './sandboxes.js';
import { VolumeMount, VolumeMounts } from './volumes.js';
import { SecretBindings } from './secrets.js';

const TemplateFields = {
  image: Type.Optional(Type.String({ minLength: 1 })),
  memory_mb: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
  vcpus: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
  ttl: Type.Optional(Duration),
  provider: Type.Optional(Type.String({ minLength: 1 })),
  metadata: Type.Optional(StringMap),
  network: Type.Optional(Network),
  egress: Type.Optional(Egress),
  snapshot: Type.Optional(
    Type.String({ minLength: 1, maxLength: 256, description: 'sbx extension: spawns start from this snapshot (leave image out)' }),
  ),
  volumes: Type.Optional(VolumeMounts),
  secrets: Type.Optional(SecretBindings),
  warm: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 64,
      description: 'sbx extension: runtimes of this shape kept ready, so spawns skip the provider start (DESIGN §11)',
    }),
  ),
  auto_pause: Type.Optional(AutoPause),
  on_expire: Type.Optional(OnExpire),
};

export const TemplateName = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });

export const CreateTemplateRequest = Type.Object({ name: TemplateName, ...TemplateFields }, { additionalProperties: false });
export type CreateTemplateRequest = Static<typeof CreateTemplateRequest>;

export const UpdateTemplateRequest = Type.Object(TemplateFields, { additionalProperties: false });
export type UpdateTemplateRequest = Static<typeof UpdateTemplateRequest>;

export const TemplateSpawnRequest = Type.Object(
  {
    ttl: Type.Optional(Duration),
    provider: Type.Optional(Type.String({ minLength: 1 })),
    metadata: Type.Optional(StringMap),
    owner_id: Type.Optional(Type.String()),
    network: Type.Optional(Network),
    egress: Type.Optional(Egress),
  },
  { additionalProperties: false },
);
export type TemplateSpawnRequest = Static<typeof TemplateSpawnRequest>;

/**
 * Template object (DESIGN.md §3): every field is always present; `null` where the template does
 * not set it (a spawn from it then takes the server default).
 */
export const Template = Type.Object(
  {
    name: Type.String(),
    image: Type.Union([Type.String(), Type.Null()]),
    memory_mb: Type.Union([Type.Integer(), Type.Null()]),
    vcpus: Type.Union([Type.Integer(), Type.Null()]),
    ttl: Type.Union([Type.String(), Type.Null()]),
    provider: Type.Union([Type.String(), Type.Null()]),
    metadata: StringMap,
    network: Type.Union([Type.String(), Type.Null()]),
    snapshot: Type.Union([Type.String(), Type.Null()]),
    volumes: Type.Union([Type.Array(VolumeMount), Type.Null()]),
    warm: Type.Union([Type.Integer(), Type.Null()]),
    egress: Type.Union([EgressLists, Type.Null()]),
    secrets: Type.Union([Type.Array(Type.String()), Type.Null()], {
      description: "sbx extension: secrets its spawns bind, resolved in the spawner's namespace",
    }),
    auto_pause: Type.Union([Type.String(), Type.Null()]),
    on_expire: Type.Union([OnExpire, Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Template' },
);
export type Template = Static<typeof Template>;
