import { Type, type Static } from '@sinclair/typebox';
import { Duration, StringMap } from './common.js';

/** A terminal's size in characters. */
export const TerminalSize = Type.Object(
  { cols: Type.Integer({ minimum: 1, maximum: 65535 }), rows: Type.Integer({ minimum: 1, maximum: 65535 }) },
  { $id: 'TerminalSize', additionalProperties: false },
);
export type TerminalSize = Static<typeof TerminalSize>;

/**
 * Background processes (DESIGN.md §10). The start body is an exec request without streaming;
 * `stdin: true` opens a live stdin (`…/stdin`, `…/stdin/close`), `pty` runs it in a terminal
 * (`…/resize`; providers with a tty only, else 501). Either one makes the process attached.
 */
export const ProcessStart = Type.Object(
  {
    command: Type.String({ minLength: 1 }),
    args: Type.Optional(Type.Array(Type.String())),
    env: Type.Optional(StringMap),
    workdir: Type.Optional(Type.String()),
    timeout: Type.Optional(Duration),
    mode: Type.Optional(Type.Union([Type.Literal('shell'), Type.Literal('argv')])),
    stdin: Type.Optional(Type.Boolean({ description: 'Keep stdin open for POST …/stdin until …/stdin/close' })),
    pty: Type.Optional(TerminalSize),
  },
  { $id: 'ProcessStart', additionalProperties: false },
);
export type ProcessStart = Static<typeof ProcessStart>;

export const ProcessStateSchema = Type.Union([
  Type.Literal('running'),
  Type.Literal('exited'),
  Type.Literal('killed'),
  Type.Literal('timeout'),
]);

export const ProcessInfo = Type.Object(
  {
    id: Type.String({ description: '`p-` and 12 base-36 characters' }),
    sandbox_id: Type.String(),
    command: Type.String(),
    args: Type.Array(Type.String()),
    mode: Type.Union([Type.Literal('shell'), Type.Literal('argv')]),
    state: ProcessStateSchema,
    /** Null while running, and for a process killed without a status. */
    exit_code: Type.Union([Type.Integer(), Type.Null()]),
    started_at: Type.String(),
    ended_at: Type.Union([Type.String(), Type.Null()]),
    /** `detached`: runs in its own session in the sandbox and outlives the control plane; `attached`: ends with it. */
    runner: Type.Union([Type.Literal('detached'), Type.Literal('attached')]),
    deadline_at: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'ProcessInfo' },
);
export type ProcessInfo = Static<typeof ProcessInfo>;

export const ProcessOutputQuery = Type.Object(
  {
    /** Byte offset to read from (both streams counted in the order they were written). */
    offset: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Keep the response open and send output as it comes, until the process ends. */
    follow: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type ProcessOutputQuery = Static<typeof ProcessOutputQuery>;

/**
 * One NDJSON line of a process's output: bytes of `stdout`/`stderr` at `offset` (text, or base64
 * marked with `encoding` when not valid UTF-8 on their own), `truncated` (bytes before `offset`
 * were dropped: 16 MiB are kept), or the last line `exit`.
 */
export const ProcessOutputChunk = Type.Object({
  stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('truncated'), Type.Literal('exit')]),
  offset: Type.Integer({ minimum: 0 }),
  data: Type.Optional(Type.String()),
  encoding: Type.Optional(Type.Literal('base64')),
  exit_code: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  state: Type.Optional(ProcessStateSchema),
});
export type ProcessOutputChunk = Static<typeof ProcessOutputChunk>;

export const ProcessSignal = Type.Object(
  {
    /** SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 (the `SIG` prefix is optional). */
    signal: Type.String({ minLength: 1, maxLength: 16 }),
  },
  { $id: 'ProcessSignal', additionalProperties: false },
);
export type ProcessSignal = Static<typeof ProcessSignal>;

/** `POST …/processes/{pid}/stdin`: bytes for the process's stdin (text, or base64 with `encoding`). */
export const ProcessStdin = Type.Object(
  {
    data: Type.String({ maxLength: 1024 * 1024 * 2 }),
    encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
  },
  { $id: 'ProcessStdin', additionalProperties: false },
);
export type ProcessStdin = Static<typeof ProcessStdin>;
