import { Type, type Static } from '@sinclair/typebox';
import { Duration, StringMap } from './common.js';

export const ExecRequest = Type.Object(
  {
    command: Type.String({ minLength: 1 }),
    args: Type.Optional(Type.Array(Type.String())),
    env: Type.Optional(StringMap),
    workdir: Type.Optional(Type.String()),
    timeout: Type.Optional(Duration),
    stream: Type.Optional(Type.Boolean()),
    /** sbx: `shell` (default, `sh -c`) or `argv` (exec directly). */
    mode: Type.Optional(Type.Union([Type.Literal('shell'), Type.Literal('argv')])),
    /** sbx: with `stream`, end with `{stream:"exit", data:"", exit_code, duration}`. */
    exit_record: Type.Optional(Type.Boolean()),
    /** sbx: bytes for the command's stdin (utf8, or base64 with stdin_encoding). */
    stdin: Type.Optional(Type.String()),
    stdin_encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
  },
  { $id: 'ExecRequest', additionalProperties: false },
);
export type ExecRequest = Static<typeof ExecRequest>;

export const ExecResult = Type.Object(
  {
    exit_code: Type.Integer(),
    stdout: Type.String(),
    stderr: Type.String(),
    duration: Duration,
    /** sbx: present and true when output past the limit was dropped. */
    truncated: Type.Optional(Type.Boolean()),
  },
  { $id: 'ExecResult' },
);
export type ExecResult = Static<typeof ExecResult>;

/** One NDJSON line of a streamed exec. `exit` only when `exit_record` was asked. */
export const ExecChunk = Type.Object({
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('exit')]),
  data: Type.String(),
  exit_code: Type.Optional(Type.Integer()),
  duration: Type.Optional(Duration),
  timed_out: Type.Optional(Type.Boolean()),
});
export type ExecChunk = Static<typeof ExecChunk>;
