import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

export const FileMode = Type.String({ pattern: '^0?[0-7]{1,4}$', description: 'octal, e.g. 644 or 0755' });

export const FileInfo = Type.Object(
  {
    name: Type.String(),
    path: Type.String(),
    size: Type.Integer(),
    is_dir: Type.Boolean(),
    mod_time: Timestamp,
    mode: Type.String(),
  },
  { $id: 'FileInfo' },
);
export type FileInfoDto = Static<typeof FileInfo>;

export const WriteFileRequest = Type.Object(
  {
    path: Type.String({ minLength: 1 }),
    content: Type.String(),
    mode: Type.Optional(FileMode),
    encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
  },
  { additionalProperties: false },
);
export type WriteFileRequest = Static<typeof WriteFileRequest>;

export const PathQuery = Type.Object({ path: Type.String({ minLength: 1 }) });
export const ListQuery = Type.Object({ path: Type.Optional(Type.String({ minLength: 1, default: '/' })) });
export const DeleteQuery = Type.Object({
  path: Type.String({ minLength: 1 }),
  recursive: Type.Optional(Type.Boolean({ default: false })),
});
export const GlobQuery = Type.Object({ pattern: Type.String({ minLength: 1 }) });

export const MoveRequest = Type.Object(
  { old_path: Type.String({ minLength: 1 }), new_path: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export const ChmodRequest = Type.Object(
  { path: Type.String({ minLength: 1 }), mode: FileMode },
  { additionalProperties: false },
);
