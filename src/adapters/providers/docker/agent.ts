import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { badRequest, SbxError } from '../../../core/errors.js';
import type { ExecControl, ExecEvent, ExecSignal, ExecSpec } from '../../../core/ports/index.js';
import { isLiveStdin } from '../shared/live-input.js';
import { AgentConnection, Inbox, MAX_CHUNK, R, STAGE, T } from './agent-conn.js';
import { bounded, isNotFound } from './errors.js';
import { deniedText, execArgv, notFoundText } from './exec.js';
import { type ContainerUser, WORKDIR } from './options.js';

/** Label with the token the container's agent says hello with (DESIGN §11, docs/agent.md). */
export const LABEL_AGENT = 'sbx.agent_token';
/** Where the binary (read-only) and the socket directory (per container) appear in a container. */
export const AGENT_BIN = '/.sbx/sbx-agent';
export const AGENT_RUN = '/.sbx/run';
const SOCKET_NAME = 'agent.sock';
const MARKER = 'SBX_EXEC_ID';
/** Unacknowledged stdin bytes to one command; the agent acknowledges what the command took. */
const STDIN_WINDOW = 4 * MAX_CHUNK;
const HELLO_TIMEOUT_MS = 1_000;
/** After a failed connect, the engine paths serve this runtime for a while before the next try. */
const RETRY_AFTER_MS = 5_000;
/**
 * Output queued for one stream beyond what the credit window allows (2 MiB in the agent) means a
 * peer that ignores credit (a sandbox standing in for its agent): the connection is ended.
 */
export const MAX_QUEUED = 8 * 1024 * 1024;
const SIGNALS: Record<ExecSignal, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15 };
export const E = { ENOENT: 2, EACCES: 13, EPERM: 1, ENOTDIR: 20, EISDIR: 21, EFBIG: 27, EROFS: 30, ENOTSUP: 95 } as const;

export interface AgentSettings {
  /** The static binary on this host, bind-mounted read-only. */
  binary: string;
  /** Host directory holding one socket directory per container. */
  stateDir: string;
}

/** Thrown by an agent operation that did not start anything: the caller uses the engine path. */
export class AgentUnavailable extends Error {}

interface RuntimeAgent {
  conn?: AgentConnection;
  connecting?: Promise<AgentConnection | undefined>;
  retryAt?: number;
  where?: { dir: string; token: string } | null;
}

/** The agents of one docker provider's containers: spawn-time setup, one connection per container. */
export class DockerAgents {
  private readonly runtimes = new Map<string, RuntimeAgent>();

  constructor(
    private readonly docker: Docker,
    private readonly settings: AgentSettings,
  ) {}

  /** One directory per container: the sandbox id and the start of its token (a second spawn of an id never shares it). */
  private dirOf(sandboxId: string, token: string): string {
    return join(this.settings.stateDir, `${sandboxId.replace(/[^A-Za-z0-9_-]/g, '_')}.${token.slice(0, 12)}`);
  }

  /**
   * The container's part: mounts (binary read-only, its own socket directory), a label with the
   * token and the shell line that starts the agent beside the keep-alive. The directory is the
   * agent's (the container's user) when this process may give it; otherwise open to it.
   */
  prepare(
    sandboxId: string,
    user: ContainerUser | undefined,
  ): { mounts: Docker.MountSettings[]; labels: Record<string, string>; start: string } | undefined {
    const token = randomBytes(18).toString('hex');
    const dir = this.dirOf(sandboxId, token);
    mkdirSync(this.settings.stateDir, { recursive: true, mode: 0o711 });
    // The state directory sits in a shared temp directory: one that is a link or someone else's is
    // not used (no agent for this container; the engine paths serve).
    const st = lstatSync(this.settings.stateDir);
    if (!st.isDirectory() || (process.getuid && st.uid !== process.getuid()) || (st.mode & 0o022) !== 0) return undefined;
    mkdirSync(dir, { mode: 0o700 });
    const uid = user?.uid ?? 0;
    if (process.getuid?.() === 0) chownSync(dir, uid, user?.gid ?? 0);
    else chmodSync(dir, 0o777);
    const start = `[ -x ${AGENT_BIN} ] && SBX_AGENT_TOKEN=${token} ${AGENT_BIN} ${AGENT_RUN}/${SOCKET_NAME} </dev/null >/dev/null 2>&1 & `;
    return {
      mounts: [
        { Type: 'bind', Source: this.settings.binary, Target: AGENT_BIN, ReadOnly: true },
        { Type: 'bind', Source: dir, Target: AGENT_RUN, ReadOnly: false },
      ],
      labels: { [LABEL_AGENT]: token },
      start,
    };
  }

  /**
   * After the start: wait for the socket (it is there within milliseconds on an idle host; up to
   * 2 s on a loaded one), so the first exec finds the agent up instead of falling back to the engine,
   * and connect: the first exec (a warm claim's above all) does not pay for it (issue 33), and the
   * connection is made before any code of the sandbox runs. A later reconnect checks the token as ever.
   */
  async started(runtimeId: string, sandboxId: string, token: string): Promise<void> {
    const dir = this.dirOf(sandboxId, token);
    this.runtimes.set(runtimeId, { where: { dir, token } });
    const sock = join(dir, SOCKET_NAME);
    for (let i = 0; i < 400 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 5));
    if (existsSync(sock)) await this.get(runtimeId);
  }

  /** The runtime's connection, or undefined (no agent, not up, gone): then the engine paths serve. */
  async get(runtimeId: string): Promise<AgentConnection | undefined> {
    let st = this.runtimes.get(runtimeId);
    if (!st) this.runtimes.set(runtimeId, (st = {}));
    if (st.conn?.alive) return st.conn;
    if (st.connecting !== undefined) return st.connecting;
    if (st.where === null || (st.retryAt !== undefined && Date.now() < st.retryAt)) return undefined;
    const state = st;
    state.connecting = this.connect(runtimeId, state).finally(() => (state.connecting = undefined));
    return state.connecting;
  }

  private async connect(runtimeId: string, st: RuntimeAgent): Promise<AgentConnection | undefined> {
    if (st.where === undefined) {
      try {
        const info = await this.docker.getContainer(runtimeId).inspect({ abortSignal: bounded(undefined, 10_000) });
        const token = info.Config?.Labels?.[LABEL_AGENT];
        const sandboxId = info.Config?.Labels?.['sbx.sandbox_id'];
        st.where = token && sandboxId ? { dir: this.dirOf(sandboxId, token), token } : null;
      } catch (err) {
        if (isNotFound(err)) st.where = null;
        else st.retryAt = Date.now() + RETRY_AFTER_MS;
        return undefined;
      }
    }
    if (!st.where) return undefined;
    const path = join(st.where.dir, SOCKET_NAME);
    // Connect, and once more after a moment (an agent still starting, a connection just lost).
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const conn = await AgentConnection.connect(path, st.where.token, HELLO_TIMEOUT_MS);
        st.conn = conn;
        st.retryAt = undefined;
        conn.onClose(() => {
          if (st.conn === conn) st.conn = undefined;
        });
        return conn;
      } catch {
        if (attempt === 0) await new Promise((r) => setTimeout(r, 20));
      }
    }
    st.retryAt = Date.now() + RETRY_AFTER_MS;
    return undefined;
  }

  /** A destroyed runtime: its connection closes and its socket directory goes. */
  async forget(runtimeId: string, where?: { sandboxId?: string; token?: string }): Promise<void> {
    const st = this.runtimes.get(runtimeId);
    this.runtimes.delete(runtimeId);
    st?.conn?.close();
    const dir = st?.where?.dir ?? (where?.sandboxId && where.token ? this.dirOf(where.sandboxId, where.token) : undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
    try {
      rmdirSync(this.settings.stateDir); // only when no container has a directory left
    } catch {
      // not empty, or already gone
    }
  }

  /** True when this runtime's socket directory is known without asking the engine. */
  knows(runtimeId: string): boolean {
    return Boolean(this.runtimes.get(runtimeId)?.where);
  }

  close(): void {
    for (const st of this.runtimes.values()) st.conn?.close();
    this.runtimes.clear();
  }
}

export type Frame = { type: number; payload: Buffer } | { lost: true };

export function cString(s: string): Buffer {
  if (s.includes('\0')) throw badRequest('arguments, environment and paths cannot contain NUL bytes');
  return Buffer.from(`${s}\0`, 'utf8');
}

export function agentGone(what: string): SbxError {
  return new SbxError('provider_error', `${what}: the sandbox agent went away`);
}

/** True when the agent can run this exec as the engine would (same user, no terminal). */
export function agentCanExec(conn: AgentConnection, spec: ExecSpec): boolean {
  if (spec.tty) return false;
  if (spec.user && (spec.user.uid !== conn.hello.uid || spec.user.gid !== conn.hello.gid)) return false;
  return true;
}

/** Most output bytes merged into one chunk (the agent sends its pipes' output 64 KiB at a time). */
const MERGE_MAX = 1024 * 1024;

/**
 * `first`'s payload joined with the output frames of the same stream already queued behind it (up
 * to MERGE_MAX): a busy stream travels in fewer, bigger chunks through every layer above (one
 * frame, one socket write, one credit each) while a quiet one goes out at once, as it came.
 */
function mergeQueued(inbox: Inbox<Frame>, first: { type: number; payload: Buffer }): Buffer {
  let parts: Buffer[] | undefined;
  let size = first.payload.byteLength;
  for (let next = inbox.peek(); next && !('lost' in next) && next.type === first.type; next = inbox.peek()) {
    if (size + next.payload.byteLength > MERGE_MAX) break;
    inbox.take();
    (parts ??= [first.payload]).push(next.payload);
    size += next.payload.byteLength;
  }
  return parts ? Buffer.concat(parts, size) : first.payload;
}

/**
 * One command through the agent, with the engine path's semantics: sbx's own texts for a command
 * that cannot start (127/126), a workdir error, stdin then EOF or live, signals to the whole tree,
 * output pulled with credit (a slow consumer slows the command), exit code last. An abort or an
 * early stop kills the tree. Throws AgentUnavailable when the agent could not even take it.
 */
export async function* agentExec(
  conn: AgentConnection,
  spec: ExecSpec,
  signal: AbortSignal,
  onOutput?: (stream: 'stdout' | 'stderr', data: Uint8Array) => void,
  onLost?: (marker: string) => Promise<void>,
): AsyncGenerator<ExecEvent> {
  if (signal.aborted) return;
  const inbox = new Inbox<Frame>();
  let stdinAcked = 0;
  let stdinWake: (() => void) | undefined;
  const id = conn.open({
    frame: (type, payload) => {
      if (type === R.STDIN_ACK) {
        stdinAcked += payload.readUInt32LE(0);
        const w = stdinWake;
        stdinWake = undefined;
        w?.();
        return;
      }
      inbox.push({ type, payload });
      if (inbox.bytes > MAX_QUEUED) conn.close();
    },
    lost: () => {
      inbox.push({ lost: true });
      stdinWake?.();
    },
  });
  const argv = execArgv(spec);
  const marker = `${MARKER}=${randomBytes(12).toString('hex')}`;
  const env = [...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), marker];
  const live = isLiveStdin(spec.stdin);
  const bytes = live ? undefined : (spec.stdin as Uint8Array | undefined);
  const withStdin = live || (bytes !== undefined && bytes.byteLength > 0);
  const workdir = spec.workdir ?? WORKDIR;
  const head = Buffer.alloc(12);
  head.writeUInt32LE(withStdin ? 1 : 0, 0);
  head.writeUInt32LE(argv.length, 4);
  head.writeUInt32LE(env.length, 8);
  let finished = false;
  let stopped = false;
  let liveIt: AsyncIterator<Uint8Array> | undefined;
  try {
    if (!conn.alive || !conn.send(id, T.EXEC, head, cString(workdir), ...argv.map(cString), ...env.map(cString))) {
      if (!conn.alive) throw new AgentUnavailable();
    }
    const first = await inbox.next();
    if (!first || 'lost' in first) throw new AgentUnavailable();
    if (first.type === R.ERROR) {
      finished = true;
      const stage = first.payload.readUInt32LE(0);
      const errno = first.payload.readUInt32LE(4);
      if (stage === STAGE.CHDIR) throw badRequest(`workdir ${workdir} is not an existing directory in the sandbox`);
      if (stage !== STAGE.EXEC) throw new AgentUnavailable();
      const name = argv[0]!;
      const text =
        errno === E.ENOENT
          ? notFoundText(name)
          : errno === E.EACCES || errno === E.EISDIR
            ? deniedText(name)
            : `sbx: cannot execute: ${name}\n`;
      const data = Buffer.from(text);
      onOutput?.('stderr', data);
      yield { stream: 'stderr', data };
      yield { stream: 'exit', exit_code: errno === E.ENOENT ? 127 : 126 };
      return;
    }
    if (first.type !== R.STARTED) throw new AgentUnavailable();
    // From here the command runs: losing the agent is an error of this exec, never a second run.
    let grace: NodeJS.Timeout | undefined;
    const onAbort = () => {
      conn.send(id, T.SIGNAL, u32(SIGNALS.SIGKILL));
      // The tree is killed; its output ends by itself, or is cut after a grace.
      grace = setTimeout(() => inbox.push({ lost: true }), 1_000);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    const pumps: Array<Promise<void>> = [];
    let sentIn = 0;
    const feed = async (chunk: Uint8Array) => {
      for (let at = 0; at < chunk.byteLength && conn.alive && !stopped; at += MAX_CHUNK) {
        while (sentIn - stdinAcked > STDIN_WINDOW && conn.alive && !stopped) await new Promise<void>((r) => (stdinWake = r));
        const part = chunk.subarray(at, at + MAX_CHUNK);
        sentIn += part.byteLength;
        if (!conn.send(id, T.STDIN, part)) await conn.drained();
      }
    };
    if (live) {
      const it = (spec.stdin as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      liveIt = it;
      pumps.push(
        (async () => {
          try {
            for (;;) {
              const r = await it.next();
              if (r.done || stopped || !conn.alive) break;
              await feed(r.value);
            }
            conn.send(id, T.EOF);
          } catch {
            conn.send(id, T.EOF);
          }
        })(),
      );
    } else if (withStdin) {
      pumps.push(feed(bytes!).then(() => void conn.send(id, T.EOF)));
    }
    if (spec.controls) {
      const controls = spec.controls;
      pumps.push(
        (async () => {
          try {
            for await (const c of controls as AsyncIterable<ExecControl>) {
              if (stopped || !conn.alive) break;
              if (c.type === 'signal') conn.send(id, T.SIGNAL, u32(SIGNALS[c.signal]));
            }
          } catch {
            // A controls stream that fails ends the controls, not the command.
          }
        })(),
      );
    }
    try {
      for (;;) {
        const f = await inbox.next();
        if (!f) continue;
        if ('lost' in f) {
          // The command outlives its agent: the engine kills what is left of it, then this exec fails.
          if (!conn.alive) await onLost?.(marker);
          if (signal.aborted) return;
          throw agentGone('exec');
        }
        if (f.type === R.STDOUT || f.type === R.STDERR) {
          if (signal.aborted) continue;
          const stream = f.type === R.STDOUT ? 'stdout' : 'stderr';
          const data = mergeQueued(inbox, f);
          onOutput?.(stream, data);
          yield { stream, data };
          // Credit after the consumer took the chunk: a slow consumer holds the command's output back.
          conn.send(id, T.CREDIT, u32(data.byteLength));
        } else if (f.type === R.EXIT) {
          finished = true;
          if (signal.aborted) return;
          yield { stream: 'exit', exit_code: f.payload.readInt32LE(0) };
          return;
        }
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      clearTimeout(grace);
      stopped = true;
      stdinWake?.();
      void liveIt?.return?.()?.catch(() => undefined);
      void Promise.allSettled(pumps);
    }
  } finally {
    stopped = true;
    // The consumer stopped early, or the run failed: nothing of the command may keep running.
    if (!finished) conn.send(id, T.CANCEL);
    conn.release(id);
  }
}

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0, 0);
  return b;
}
