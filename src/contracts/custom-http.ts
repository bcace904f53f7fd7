/**
 * The custom HTTP provider contract (DESIGN.md §12, docs/providers/custom-http.md): the bodies a
 * backend and sbx exchange, one source for the client's checks (adapters/providers/custom-http),
 * the reference server's validation (`sbx provider-server`) and their types. Shapes are the
 * anchor's (StacyVM's custom provider), so a backend written for it works unchanged; the fields
 * marked "sbx" are additions an anchor backend may ignore.
 */
import { Type, type Static } from '@sinclair/typebox';

/** The header carrying the backend's API key on every request (`/health` included). */
export const CUSTOM_HTTP_KEY_HEADER = 'x-api-key';
/** Content type of a streamed exec answer: one JSON object per line. */
export const NDJSON = 'application/x-ndjson';

const Str = Type.String();
const Env = Type.Record(Type.String(), Type.String());
/** sbx: `base64` when `data`/`content` carries bytes that are not UTF-8 text; absent = text. */
const Encoding = Type.Optional(Type.Literal('base64'));

export const SpawnRequest = Type.Object({
  image: Str,
  memory_mb: Type.Optional(Type.Integer({ minimum: 1 })),
  vcpus: Type.Optional(Type.Integer({ minimum: 1 })),
  metadata: Type.Optional(Env),
  /** sbx: the sandbox id sbx gave, for the backend's own labels. */
  sandbox_id: Type.Optional(Str),
  /** sbx: `none` or `bridge` when the spawn asked for one. */
  network: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('bridge')])),
});
export type SpawnRequest = Static<typeof SpawnRequest>;

/** `network` (sbx): the network the runtime got; a spawn that asked for one needs it confirmed. */
export const SpawnResponse = Type.Object({ id: Type.String({ minLength: 1 }), network: Type.Optional(Str) });

export const StatusResponse = Type.Object({ id: Type.Optional(Str), state: Type.Optional(Str) });

export const HealthResponse = Type.Object({
  ok: Type.Optional(Type.Boolean()),
  /** sbx: what the backend supports beyond the anchor's set (e.g. `console`, `exec_stdin`). */
  capabilities: Type.Optional(Type.Array(Str)),
  runtime_count: Type.Optional(Type.Integer({ minimum: 0 })),
});
export type HealthResponse = Static<typeof HealthResponse>;

export const ExecRequest = Type.Object({
  sandbox_id: Str,
  command: Str,
  args: Type.Optional(Type.Array(Str)),
  /** `shell`: `sh -c` with command and quoted args; `argv`: exec [command, ...args]. */
  mode: Type.Optional(Type.Union([Type.Literal('shell'), Type.Literal('argv')])),
  env: Type.Optional(Env),
  workdir: Type.Optional(Str),
  stream: Type.Optional(Type.Boolean()),
  /** sbx: the command's whole stdin, base64. */
  stdin: Type.Optional(Str),
  /** sbx: the id under which live stdin and controls are sent to this exec (`/exec/{exec_id}/…`). */
  exec_id: Type.Optional(Type.String({ minLength: 8, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' })),
  /** sbx: stdin arrives live at `/exec/{exec_id}/stdin`; EOF when `?eof=1`. */
  stdin_live: Type.Optional(Type.Boolean()),
});
export type ExecRequest = Static<typeof ExecRequest>;

export const ExecResponse = Type.Object({ exit_code: Type.Integer(), stdout: Str, stderr: Str, encoding: Encoding });
export type ExecResponse = Static<typeof ExecResponse>;

/** One NDJSON line of a streamed exec: output chunks, then (sbx) exactly one exit line last. */
export const ExecLine = Type.Union([
  Type.Object({ stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]), data: Str, encoding: Encoding }),
  Type.Object({ stream: Type.Literal('exit'), exit_code: Type.Integer() }),
  /** sbx: the exec failed after the answer began; `code` as in STATUS_CODES' values, never a message sbx shows. */
  Type.Object({ stream: Type.Literal('error'), code: Str, message: Type.Optional(Str) }),
]);
export type ExecLine = Static<typeof ExecLine>;

export const ExecControlRequest = Type.Union([
  Type.Object({ type: Type.Literal('signal'), signal: Type.String({ minLength: 1, maxLength: 16 }) }),
  Type.Object({ type: Type.Literal('resize'), cols: Type.Integer({ minimum: 1 }), rows: Type.Integer({ minimum: 1 }) }),
]);

export const WriteFileRequest = Type.Object({
  sandbox_id: Str,
  path: Str,
  content: Str,
  mode: Type.Optional(Type.String({ pattern: '^0?[0-7]{3,4}$' })),
  encoding: Encoding,
});
export type WriteFileRequest = Static<typeof WriteFileRequest>;
export const DeleteFileRequest = Type.Object({ sandbox_id: Str, path: Str, recursive: Type.Optional(Type.Boolean()) });
export const MoveFileRequest = Type.Object({ sandbox_id: Str, old_path: Str, new_path: Str });
export const ChmodRequest = Type.Object({ sandbox_id: Str, path: Str, mode: Type.String({ pattern: '^0?[0-7]{3,4}$' }) });

/** A file as the backend describes it: snake_case, or the anchor's Go field names. */
export const WireFileInfo = Type.Object({
  name: Type.Optional(Str),
  path: Type.Optional(Str),
  Path: Type.Optional(Str),
  size: Type.Optional(Type.Number({ minimum: 0 })),
  Size: Type.Optional(Type.Number({ minimum: 0 })),
  is_dir: Type.Optional(Type.Boolean()),
  IsDir: Type.Optional(Type.Boolean()),
  mod_time: Type.Optional(Str),
  ModTime: Type.Optional(Str),
  mode: Type.Optional(Str),
  Mode: Type.Optional(Str),
});
export type WireFileInfo = Static<typeof WireFileInfo>;
export const FileList = Type.Array(WireFileInfo);
export const GlobResponse = Type.Array(Str);

export const LogsResponse = Type.Object({ lines: Type.Array(Str), cursor: Type.Optional(Type.Integer({ minimum: 0 })) });

/** The backend's HTTP status → the typed error sbx reports (the body is never read into it). */
export const STATUS_CODES: Readonly<Record<number, string>> = {
  400: 'bad_request',
  403: 'forbidden',
  404: 'not_found',
  408: 'timeout',
  409: 'conflict',
  410: 'not_found',
  413: 'payload_too_large',
  429: 'resource_limit',
  501: 'not_implemented',
  503: 'unavailable',
};

/** A backend's status for each of sbx's error codes (the reference server's answers). */
export const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  resource_limit: 429,
  not_implemented: 501,
  unavailable: 503,
};
