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
    binary: Type.Optional(
      Type.Boolean({
        description:
          'sbx extension: byte-exact output. Output that is not valid UTF-8 comes base64-encoded and marked ' +
          '(stream chunks `encoding: "base64"`, buffered results `stdout_encoding`/`stderr_encoding`) instead of with ' +
          'U+FFFD in place of the bad bytes; valid text stays plain text.',
      }),
    ),
  },
  { $id: 'ExecRequest', additionalProperties: false },
);
export type ExecRequest = Static<typeof ExecRequest>;

const OutputEncoding = (field: string) =>
  Type.Literal('base64', {
    description: `sbx extension (with \`binary\`): present when \`${field}\` is base64 because the bytes are not valid UTF-8`,
  });

export const ExecResult = Type.Object(
  {
    exit_code: Type.Integer(),
    stdout: Type.String(),
    stderr: Type.String(),
    duration: Duration,
    /** sbx: present and true when output past the limit was dropped. */
    truncated: Type.Optional(Type.Boolean()),
    stdout_encoding: Type.Optional(OutputEncoding('stdout')),
    stderr_encoding: Type.Optional(OutputEncoding('stderr')),
  },
  { $id: 'ExecResult' },
);
export type ExecResult = Static<typeof ExecResult>;

/** One NDJSON line of a streamed exec. `exit` only when `exit_record` was asked. */
export const ExecChunk = Type.Object({
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('exit')]),
  data: Type.String(),
  encoding: Type.Optional(OutputEncoding('data')),
  /** null when the provider's backend does not report one (a custom HTTP backend written for the anchor, DESIGN §12). */
  exit_code: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  duration: Type.Optional(Duration),
  timed_out: Type.Optional(Type.Boolean()),
});
export type ExecChunk = Static<typeof ExecChunk>;

// ---------------------------------------------------------------- WebSocket exec (DESIGN.md §3)
// GET /api/v1/sandboxes/{id}/exec/ws. Every message is one JSON text frame.

const TerminalSide = Type.Integer({ minimum: 1, maximum: 65535 });

/**
 * Client → server, first message: the exec request plus terminal fields. `type` may be left out
 * (a plain exec request is a start). `stdin` here is sent first; stdin stays open until
 * `stdin_eof`. `stream` and `exit_record` are accepted and ignored (output always streams, the
 * `exit` message always comes); `binary` marks base64 output messages as on the NDJSON stream.
 */
export const ExecWsStart = Type.Object(
  {
    type: Type.Optional(Type.Literal('start')),
    ...ExecRequest.properties,
    /** Run in a terminal (providers with the `tty` capability; others run with pipes). */
    tty: Type.Optional(Type.Boolean()),
    /** Terminal size; default 80 × 24. */
    cols: Type.Optional(TerminalSide),
    rows: Type.Optional(TerminalSide),
  },
  { $id: 'ExecWsStart', additionalProperties: false },
);
export type ExecWsStart = Static<typeof ExecWsStart>;

/** Client → server: bytes for the command's stdin (utf8 text, or base64). */
export const ExecWsStdin = Type.Object(
  {
    type: Type.Literal('stdin'),
    data: Type.String(),
    encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
  },
  { additionalProperties: false },
);
export type ExecWsStdin = Static<typeof ExecWsStdin>;

/** Client → server: end of stdin (the command reads EOF). */
export const ExecWsStdinEof = Type.Object({ type: Type.Literal('stdin_eof') }, { additionalProperties: false });

/** Client → server: new terminal size (ignored without a terminal). */
export const ExecWsResize = Type.Object(
  { type: Type.Literal('resize'), cols: TerminalSide, rows: TerminalSide },
  { additionalProperties: false },
);
export type ExecWsResize = Static<typeof ExecWsResize>;

/**
 * Client → server: a signal for every process of the command: SIGINT, SIGTERM, SIGKILL, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGUSR2 (the `SIG` prefix is optional). With a terminal, SIGINT and SIGQUIT act
 * as ^C and ^\ (the foreground job gets them).
 */
export const ExecWsSignal = Type.Object(
  { type: Type.Literal('signal'), signal: Type.String({ minLength: 1, maxLength: 16 }) },
  { additionalProperties: false },
);
export type ExecWsSignal = Static<typeof ExecWsSignal>;

export type ExecWsClientMessage = ExecWsStart | ExecWsStdin | Static<typeof ExecWsStdinEof> | ExecWsResize | ExecWsSignal;

/** Server → client: output as it comes (with a terminal, everything is `stdout`). */
export const ExecWsOutput = Type.Object({
  type: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]),
  data: Type.String(),
  encoding: Type.Optional(OutputEncoding('data')),
});
/** Server → client: the last message of a run; `timed_out` (with 124) when the deadline killed it. */
export const ExecWsExit = Type.Object({
  type: Type.Literal('exit'),
  /** null when the provider's backend does not report one (DESIGN §12). */
  exit_code: Type.Union([Type.Integer(), Type.Null()]),
  duration: Type.Optional(Duration),
  timed_out: Type.Optional(Type.Boolean()),
});
/** Server → client: the exec could not start or failed; the socket closes after it. */
export const ExecWsError = Type.Object({ type: Type.Literal('error'), code: Type.String(), message: Type.String() });
export type ExecWsServerMessage = Static<typeof ExecWsOutput> | Static<typeof ExecWsExit> | Static<typeof ExecWsError>;
