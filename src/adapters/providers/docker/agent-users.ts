import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, constants, existsSync, fchownSync, fstatSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { AgentConnection } from './agent-conn.js';
import { bounded } from './errors.js';

/*
 * Agents for execs as another user (docs/agent.md, "Agents of other users"): the container's own
 * agent runs as the container's user and cannot become anyone else (no setuid, no capabilities).
 * The first exec as uid:gid starts a second agent as that user through ONE engine exec of the same
 * read-only binary, with a fresh token and its own socket directory (0700, that uid's): later execs
 * as that user take its connection. Anything failing leaves the engine path serving, as before.
 */

/** Most user agents alive in one container: beyond, the engine serves. */
export const MAX_USER_AGENTS = 4;
/** Failed starts for one user after which its execs stay with the engine in this container. */
const MAX_FAILURES = 3;
/** The engine exec, the socket appearing and the hello together. */
const START_TIMEOUT_MS = 3_000;
const RETRY_AFTER_MS = 5_000;

export interface ExecUserId {
  uid: number;
  gid: number;
}

interface UserAgent {
  conn?: AgentConnection;
  starting?: Promise<AgentConnection | undefined>;
  retryAt?: number;
  failures: number;
}

interface RuntimeUsers {
  agents: Map<string, UserAgent>;
}

/** The user agents of one provider's containers, keyed by runtime then `uid:gid`. */
export class UserAgents {
  private readonly runtimes = new Map<string, RuntimeUsers>();

  constructor(
    private readonly docker: Docker,
    private readonly binaryInContainer: string,
    private readonly runInContainer: string,
  ) {}

  /**
   * The connection to `user`'s agent in this container, started on first use; undefined when
   * there is none to be had (bounds reached, a start failed a moment ago, this process not root):
   * the engine path serves then. `dir` is the container's socket directory on this host.
   */
  async get(runtimeId: string, dir: string, user: ExecUserId): Promise<AgentConnection | undefined> {
    // Giving the directory to another uid needs root on this host; otherwise no user agents.
    if (process.getuid?.() !== 0 || !Number.isInteger(user.uid) || !Number.isInteger(user.gid) || user.uid < 0 || user.gid < 0)
      return undefined;
    let rt = this.runtimes.get(runtimeId);
    if (!rt) this.runtimes.set(runtimeId, (rt = { agents: new Map() }));
    const key = `${user.uid}:${user.gid}`;
    let ua = rt.agents.get(key);
    if (ua?.conn?.alive) return ua.conn;
    if (ua?.starting !== undefined) return ua.starting;
    if (ua && (ua.failures >= MAX_FAILURES || (ua.retryAt !== undefined && Date.now() < ua.retryAt))) return undefined;
    const live = [...rt.agents.values()].filter((a) => a.conn?.alive || a.starting !== undefined).length;
    if (live >= MAX_USER_AGENTS) return undefined;
    if (!ua) rt.agents.set(key, (ua = { failures: 0 }));
    const state = ua;
    const users = rt;
    state.starting = this.start(runtimeId, dir, user, state, () => {
      if (users.agents.get(key) === state) users.agents.delete(key);
    }).finally(() => (state.starting = undefined));
    return state.starting;
  }

  private async start(
    runtimeId: string,
    dir: string,
    user: ExecUserId,
    ua: UserAgent,
    gone: () => void,
  ): Promise<AgentConnection | undefined> {
    const token = randomBytes(18).toString('hex');
    const name = `u${user.uid}-${user.gid}.${token.slice(0, 12)}`;
    const hostDir = join(dir, name);
    const deadline = Date.now() + START_TIMEOUT_MS;
    let conn: AgentConnection | undefined;
    let dirFd: number | undefined;
    try {
      userDir(dir, hostDir, user);
      const exec = await this.docker.getContainer(runtimeId).exec({
        // --once: it serves this one connection and exits when it closes (or when none came in 10 s).
        Cmd: [this.binaryInContainer, `${this.runInContainer}/${name}/agent.sock`, '--once'],
        Env: [`SBX_AGENT_TOKEN=${token}`],
        User: `${user.uid}:${user.gid}`,
        WorkingDir: '/',
        AttachStdin: false,
        AttachStdout: false,
        AttachStderr: false,
        abortSignal: bounded(undefined, START_TIMEOUT_MS),
      } as Docker.ExecCreateOptions);
      await exec.start({ Detach: true, abortSignal: bounded(undefined, START_TIMEOUT_MS) } as Docker.ExecStartOptions);
      const sock = join(hostDir, 'agent.sock');
      // Bounded polling: the agent renames its socket into place once it listens.
      while (!existsSync(sock) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 3));
      // Through the directory's descriptor: a socket path is at most 107 bytes, this one may be longer.
      dirFd = openSync(hostDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      conn = await AgentConnection.connect(`/proc/self/fd/${dirFd}/agent.sock`, token, Math.max(50, deadline - Date.now()));
      // The hello must be the agent started here, as the user asked for: its token, its uid and gid.
      if (conn.hello.uid !== user.uid || conn.hello.gid !== user.gid) throw new Error('agent: wrong user');
    } catch {
      conn?.close();
      rmSync(hostDir, { recursive: true, force: true });
      ua.failures++;
      ua.retryAt = Date.now() + RETRY_AFTER_MS;
      return undefined;
    } finally {
      if (dirFd !== undefined) closeSync(dirFd);
    }
    const c = conn;
    ua.conn = c;
    ua.retryAt = undefined;
    ua.failures = 0;
    c.onClose(() => {
      // Its agent died (a pool tenant's release kills every process of its uid) or this end closed
      // (the agent then exits): the next exec as that user starts a fresh one, in a fresh directory.
      if (ua.conn === c) {
        ua.conn = undefined;
        gone();
      }
      rmSync(hostDir, { recursive: true, force: true });
    });
    return c;
  }

  /** How many user agents are connected in this container (tests, doctor). */
  count(runtimeId: string): number {
    const rt = this.runtimes.get(runtimeId);
    return rt ? [...rt.agents.values()].filter((a) => a.conn?.alive).length : 0;
  }

  /** A destroyed runtime: every user agent's connection closes (the directories go with the container's). */
  forget(runtimeId: string): void {
    const rt = this.runtimes.get(runtimeId);
    this.runtimes.delete(runtimeId);
    for (const a of rt?.agents.values() ?? []) a.conn?.close();
  }

  close(): void {
    for (const id of [...this.runtimes.keys()]) this.forget(id);
  }
}

/**
 * `hostDir` inside the container's socket directory, made here and given to the user through a
 * descriptor opened without following links (the container's user owns the parent and could swap
 * the name for a link between the mkdir and the chown). The parent becomes 0711 so the user can
 * reach its directory; the container agent's socket stays 0600, its user's only.
 */
function userDir(dir: string, hostDir: string, user: ExecUserId): void {
  chmodSync(dir, 0o711);
  mkdirSync(hostDir, { mode: 0o700 });
  const fd = openSync(hostDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    if (!fstatSync(fd).isDirectory()) throw new Error('agent: not a directory');
    fchownSync(fd, user.uid, user.gid);
  } finally {
    closeSync(fd);
  }
}
