import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { badRequest, SbxError } from '../../../core/errors.js';
import { AgentConnection } from './agent-conn.js';
import { type ExecUserId, UserAgents } from './agent-users.js';
import { bounded, isNotFound } from './errors.js';
import type { ContainerUser } from './options.js';

/** Label with the token the container's agent says hello with (DESIGN §11, docs/agent.md). */
export const LABEL_AGENT = 'sbx.agent_token';
/** Where the binary (read-only) and the socket directory (per container) appear in a container. */
export const AGENT_BIN = '/.sbx/sbx-agent';
export const AGENT_RUN = '/.sbx/run';
const SOCKET_NAME = 'agent.sock';
const HELLO_TIMEOUT_MS = 1_000;
/** After a failed connect, the engine paths serve this runtime for a while before the next try. */
const RETRY_AFTER_MS = 5_000;
/**
 * Output queued for one stream beyond what the credit window allows (2 MiB in the agent) means a
 * peer that ignores credit (a sandbox standing in for its agent): the connection is ended.
 */
export const MAX_QUEUED = 8 * 1024 * 1024;
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
  /** Agents for execs as another user than the container's (agent-users.ts). */
  readonly users: UserAgents;

  constructor(
    private readonly docker: Docker,
    private readonly settings: AgentSettings,
  ) {
    this.users = new UserAgents(docker, AGENT_BIN, AGENT_RUN);
  }

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

  /**
   * The connection an exec as `user` goes through: the container's agent for its own user, that
   * user's agent (started on first use) for another; undefined: the engine path serves.
   */
  async forExec(runtimeId: string, user: ExecUserId | undefined): Promise<AgentConnection | undefined> {
    const main = await this.get(runtimeId);
    if (!main || !user || (user.uid === main.hello.uid && user.gid === main.hello.gid)) return main;
    const dir = this.runtimes.get(runtimeId)?.where?.dir;
    return dir ? this.users.get(runtimeId, dir, user) : undefined;
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
    this.users.forget(runtimeId);
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
    this.users.close();
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

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0, 0);
  return b;
}
