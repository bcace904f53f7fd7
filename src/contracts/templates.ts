import { Type, type Static } from '@sinclair/typebox';
import { Duration, Nullable, StringMap, Timestamp } from './common.js';

const TemplateFields = {
  image: Type.Optional(Type.String({ minLength: 1 })),
  memory_mb: Type.Optional(Type.Integer({ minimum: 1 })),
  vcpus: Type.Optional(Type.Integer({ minimum: 1 })),
  ttl: Type.Optional(Duration),
  provider: Type.Optional(Type.String({ minLength: 1 })),
  metadata: Type.Optional(StringMap),
};

export const TemplateName = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });

export const CreateTemplateRequest = Type.Object(
  { name: TemplateName, ...TemplateFields },
  { additionalProperties: false },
);
export type CreateTemplateRequest = Static<typeof CreateTemplateRequest>;

export const UpdateTemplateRequest = Type.Object(TemplateFields, { additionalProperties: false });
export type UpdateTemplateRequest = Static<typeof UpdateTemplateRequest>;

export const TemplateSpawnRequest = Type.Object(
  {
    ttl: Type.Optional(Duration),
    provider: Type.Optional(Type.String({ minLength: 1 })),
    metadata: Type.Optional(StringMap),
    owner_id: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type TemplateSpawnRequest = Static<typeof TemplateSpawnRequest>;

export const Template = Type.Object(
  {
    name: Type.String(),
    image: Nullable(Type.String()),
    memory_mb: Nullable(Type.Integer()),
    vcpus: Nullable(Type.Integer()),
    ttl: Nullable(Type.String()),
    provider: Nullable(Type.String()),
    metadata: StringMap,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Template' },
);
export type Template = Static<typeof Template>;
