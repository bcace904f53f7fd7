import { Type, type Static } from '@sinclair/typebox';
import { Duration, MAX_INT32, StringMap, Timestamp } from './common.js';

const TemplateFields = {
  image: Type.Optional(Type.String({ minLength: 1 })),
  memory_mb: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
  vcpus: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
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

/** Template object (DESIGN.md §3). Fields the template does not set are left out (spec 2.5 types them as string/integer, never null). */
export const Template = Type.Object(
  {
    name: Type.String(),
    image: Type.Optional(Type.String()),
    memory_mb: Type.Optional(Type.Integer()),
    vcpus: Type.Optional(Type.Integer()),
    ttl: Type.Optional(Type.String()),
    provider: Type.Optional(Type.String()),
    metadata: StringMap,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Template' },
);
export type Template = Static<typeof Template>;
