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

/**
 * sbx extension: the same write with the raw bytes as an `application/octet-stream` body and
 * `path`/`mode` in the query string. `path` is optional here only because JSON writes carry it in
 * the body; a raw write without it is refused (400) by the same path check as the JSON form.
 */
export const WriteFileQuery = Type.Object({
  path: Type.Optional(Type.String({ minLength: 1, description: 'raw (application/octet-stream) writes only: absolute path' })),
  mode: Type.Optional(Type.String({ ...FileMode, description: 'raw (application/octet-stream) writes only: octal, e.g. 644 or 0755' })),
});
export type WriteFileQuery = Static<typeof WriteFileQuery>;

/** A raw request body: the bytes themselves, checked by the content-type parser, not by a schema. */
export const RawBytes = Type.Unsafe<Uint8Array>({ type: 'string', format: 'binary', description: 'raw file content' });

export const PathQuery = Type.Object({ path: Type.String({ minLength: 1 }) });
/** Spec 4.2/8: `path` defaults to `/`; an empty `?path=` is the same as leaving it out. */
export const ListQuery = Type.Object({
  path: Type.Optional(Type.String({ default: '/', description: 'directory to list; absent or empty means /' })),
});
export const DeleteQuery = Type.Object({
  path: Type.String({ minLength: 1 }),
  recursive: Type.Optional(Type.Boolean({ default: false })),
});
export const GlobQuery = Type.Object({ pattern: Type.String({ minLength: 1 }) });

export const MoveRequest = Type.Object(
  { old_path: Type.String({ minLength: 1 }), new_path: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export const ChmodRequest = Type.Object({ path: Type.String({ minLength: 1 }), mode: FileMode }, { additionalProperties: false });

/** `GET …/files/watch` (sbx extension, DESIGN §16): the directory and whether its subdirectories are watched too. */
export const WatchQuery = Type.Object({
  path: Type.String({ minLength: 1, description: 'absolute path of an existing directory' }),
  recursive: Type.Optional(Type.Boolean({ default: true, description: 'watch every subdirectory too (new ones as they appear)' })),
});
export type WatchQuery = Static<typeof WatchQuery>;

/**
 * One line of a file watch stream: a change (`old_path` on a rename), or `overflow` (the watch
 * could not keep up, or watched more than 4,096 directories) after which the stream ends.
 */
export const WatchEvent = Type.Object(
  {
    type: Type.Union([
      Type.Literal('create'),
      Type.Literal('write'),
      Type.Literal('remove'),
      Type.Literal('rename'),
      Type.Literal('chmod'),
      Type.Literal('overflow'),
    ]),
    path: Type.Optional(Type.String({ description: 'absolute inside the sandbox (a pool sandbox: inside its workspace)' })),
    old_path: Type.Optional(Type.String({ description: 'renames: the name before' })),
    ts: Timestamp,
  },
  { $id: 'WatchEvent' },
);
export type WatchEventDto = Static<typeof WatchEvent>;
