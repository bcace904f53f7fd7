/**
 * The in-memory provider: runtimes that live in this process — a MemoryFs each, a small shell
 * (shell.ts) for exec, a console ring — with snapshots, volumes and pool workspaces. It starts no
 * process, opens no port and waits only on the timers, so the unit tier (DESIGN §6) drives the whole
 * control plane with it under fake timers. It passes the Provider contract (test/contract).
 *
 * It is for tests: it is in no catalogue, config or list; a caller hands it to createControlPlane
 * (`ControlPlaneOptions.providers`) explicitly. It isolates nothing from this process.
 */
import { AsyncQueue } from '../../../core/async-queue.js';
import { badRequest, conflict, isSbxError, notFound, SbxError } from '../../../core/errors.js';
import { workspacePath } from '../../../core/pool/workspace.js';
import {
  EXEC_SIGNALS,
  type CatalogItem,
  type ExecEvent,
  type ExecSignal,
  type ExecSpec,
  type Provider,
  type RuntimeInfo,
  type WorkspaceOps,
  type WorkspaceSpec,
} from '../../../core/ports/index.js';
import { ConsoleRing } from '../shared/console-ring.js';
import type { CatalogMethods } from '../shared/provider-parts.js';
import { buildShellCommand } from '../../../shared/shell.js';
import { type DirNode, MemoryFs, type Node } from './fs.js';
import { BrokenPipe, bytesInput, EMPTY_INPUT, ExitShell, Kill, Killed, liveInput, type Output, type Streams } from './io.js';
import { type Proc, runArgv, runScript } from './shell.js';
import { type ChangeListener, memoryWatch } from './watch.js';

export interface MemoryProviderOptions {
  name?: string;
  /** Labels runtimes for reconciliation (RuntimeInfo.installation_id). */
  installationId?: string;
  /** Wall-clock milliseconds for modification times (default Date.now: vitest's fake clock when faked). */
  now?: () => number;
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health', 'snapshots', 'volumes', 'fork'] as const;
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin';
/** A killed command's status: 128 + SIGKILL. */
const KILLED = 137;
const SIGNO: Record<ExecSignal, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGUSR2: 12, SIGTERM: 15 };
/** Output queued for a slow consumer before the command waits. */
const OUTPUT_HIGH_WATER = 1024 * 1024;

interface Runtime {
  id: string;
  sandboxId: string;
  fs: MemoryFs;
  ring: ConsoleRing;
  execs: Set<Kill>;
  volumes: string[];
  /** Watches of this runtime's tree (told of every change); ended when it is destroyed. */
  watchers: Set<ChangeListener>;
  endWatches: Set<() => void>;
  /** Paused (DESIGN.md §16): nothing is frozen here, but exec and status see it. */
  paused: boolean;
}

export function createMemoryProvider(opts: MemoryProviderOptions = {}): Provider {
  const st: MemoryState = {
    now: opts.now ?? (() => Date.now()),
    runtimes: new Map(),
    snapshots: new Map(),
    forks: new Map(),
    volumes: new Map(),
  };
  const { runtimes, volumes } = st;

  const get = (id: string): Runtime => {
    const rt = runtimes.get(id);
    if (!rt) throw notFound(`sandbox runtime ${id} not found`);
    return rt;
  };
  const op =
    <A extends unknown[], R>(fn: (fs: MemoryFs, ...a: A) => R) =>
    async (id: string, ...a: A): Promise<Awaited<R>> =>
      await fn(get(id).fs, ...a);

  const provider: Provider = {
    name: opts.name ?? 'memory',
    capabilities: CAPABILITIES,
    config: () => ({ runtime: 'memory', network_mode: 'none' }),
    health: async () => ({ healthy: true, latency_ms: 0, runtime_count: runtimes.size }),

    spawn: async (spec) => memorySpawn(st, spec),

    async destroy(id) {
      const rt = runtimes.get(id);
      if (!rt) return;
      runtimes.delete(id);
      for (const k of rt.execs) k.kill(KILLED);
      for (const end of [...rt.endWatches]) end();
      for (const name of rt.volumes) {
        const vol = volumes.get(name);
        if (vol) vol.users--;
      }
    },
    status: async (id) => {
      const rt = runtimes.get(id);
      return rt ? (rt.paused ? 'paused' : 'running') : 'missing';
    },
    // Pause and resume (DESIGN.md §16): a flag; an exec into a paused runtime is refused, so a
    // core that forgot to resume first is caught by the unit tier.
    pause: async (id) => void (get(id).paused = true),
    resume: async (id) => void (get(id).paused = false),
    listRuntimes: async (): Promise<RuntimeInfo[]> =>
      [...runtimes.values()].map((r) => ({
        runtime_id: r.id,
        sandbox_id: r.sandboxId,
        installation_id: opts.installationId ?? null,
        status: r.paused ? ('paused' as const) : ('running' as const),
      })),

    exec: (id, spec, signal) => {
      if (runtimes.get(id)?.paused) throw conflict(`runtime ${id} is paused: resume it first`);
      return execIn(get, id, spec, signal);
    },

    writeFile: op((fs, path: string, content: Uint8Array, mode: number | undefined) => fs.writeFile(path, content, mode)),
    readFile: op((fs, path: string, _signal?: AbortSignal, maxBytes?: number) => fs.readFile(path, maxBytes)),
    deleteFile: op((fs, path: string, recursive: boolean) => fs.deleteFile(path, recursive)),
    listFiles: op((fs, path: string) => fs.listFiles(path)),
    moveFile: op((fs, from: string, to: string) => fs.moveFile(from, to)),
    chmod: op((fs, path: string, mode: number) => fs.chmod(path, mode)),
    stat: op((fs, path: string) => fs.stat(path)),
    glob: op((fs, pattern: string) => fs.glob(pattern)),
    logs: async (id, query) => get(id).ring.read(query),

    async watch(id, path, opts, signal) {
      const rt = get(id);
      const w = memoryWatch(rt.fs, rt.watchers, path, opts.recursive, signal);
      rt.endWatches.add(w.end);
      signal.addEventListener('abort', () => rt.endWatches.delete(w.end), { once: true });
      return w;
    },

    ...memoryCatalog(st, get),

    workspace: (id, ws) => memoryWorkspace(provider, get, id, ws),

    async close() {
      for (const id of [...runtimes.keys()]) await provider.destroy(id);
    },
  };
  return provider;
}

/** The provider's state: runtimes, and the snapshots, fork images and volumes they are made from. */
interface MemoryState {
  now: () => number;
  runtimes: Map<string, Runtime>;
  snapshots: Map<string, { fs: MemoryFs; image: string; created_at: string }>;
  /** Fork images (DESIGN.md §16): a copy of a runtime's tree each. */
  forks: Map<string, { fs: MemoryFs; image: string; created_at: string }>;
  volumes: Map<string, { root: DirNode; created_at: string; users: number }>;
}

/** A runtime: a fresh tree, a snapshot's or a fork image's copy, with its volumes mounted. */
function memorySpawn(st: MemoryState, spec: Parameters<Provider['spawn']>[0]): Awaited<ReturnType<Provider['spawn']>> {
  const { now, runtimes, snapshots, forks, volumes } = st;
  if (runtimes.has(spec.sandbox_id)) throw conflict(`runtime ${spec.sandbox_id} exists`);
  if (spec.network && spec.network !== 'none')
    throw new SbxError('not_implemented', `memory sandboxes have no network: network "${spec.network}" needs the docker provider`);
  let fs = new MemoryFs(now);
  if (spec.snapshot !== undefined) {
    const snap = snapshots.get(spec.snapshot);
    if (!snap) throw notFound(`snapshot ${spec.snapshot} not found`);
    fs = snap.fs.clone();
  }
  if (spec.fork !== undefined) {
    const copy = forks.get(spec.fork);
    if (!copy) throw new SbxError('provider_error', `fork image ${spec.fork} is missing`);
    fs = copy.fs.clone();
  }
  const mounted: string[] = [];
  for (const v of spec.volumes ?? []) {
    const vol = volumes.get(v.name);
    if (!vol) throw notFound(`volume ${v.name} not found`);
    const parent = fs.mkdirs(v.mount_path.slice(0, v.mount_path.lastIndexOf('/')) || '/');
    parent.children.set(v.mount_path.slice(v.mount_path.lastIndexOf('/') + 1), vol.root);
    mounted.push(v.name);
  }
  for (const name of mounted) volumes.get(name)!.users++;
  const watchers = new Set<ChangeListener>();
  fs.onChange = (c) => {
    for (const w of watchers) w(c);
  };
  runtimes.set(spec.sandbox_id, {
    id: spec.sandbox_id,
    sandboxId: spec.sandbox_id,
    fs,
    ring: new ConsoleRing(),
    execs: new Set(),
    volumes: mounted,
    watchers,
    endWatches: new Set(),
    paused: false,
  });
  return { runtime_id: spec.sandbox_id, network: 'none' };
}

/** Snapshots, fork images and volumes: copies of trees in this process. */
function memoryCatalog(st: MemoryState, get: (id: string) => Runtime): CatalogMethods {
  const { now, snapshots, forks, volumes } = st;
  return {
    async snapshot(id, name) {
      if (snapshots.has(name)) throw conflict(`snapshot "${name}" already exists on this provider`);
      const fs = get(id).fs.clone();
      const image = `memory-snapshot/${name}`;
      snapshots.set(name, { fs, image, created_at: new Date(now()).toISOString() });
      return { image, size_bytes: treeSize(fs.root), kernel: null };
    },
    deleteSnapshot: async (name) => void snapshots.delete(name),
    async forkImage(id, fork) {
      if (forks.has(fork)) throw conflict(`fork image ${fork} already exists`);
      const image = `memory-fork/${fork}`;
      forks.set(fork, { fs: get(id).fs.clone(), image, created_at: new Date(now()).toISOString() });
      return { image };
    },
    deleteForkImage: async (fork) => void forks.delete(fork),
    async createVolume(name) {
      if (!volumes.has(name))
        volumes.set(name, {
          root: { kind: 'dir', mode: 0o755, mtime: now(), children: new Map() },
          created_at: new Date(now()).toISOString(),
          users: 0,
        });
    },
    async deleteVolume(name) {
      if ((volumes.get(name)?.users ?? 0) > 0) throw conflict(`volume ${name} is in use`);
      volumes.delete(name);
    },
    volumeSizes: async (names) => Object.fromEntries(names.map((n) => [n, volumes.has(n) ? treeSize(volumes.get(n)!.root) : null])),
    listCatalog: async () => ({
      snapshots: [...snapshots].map(([name, s]): CatalogItem => ({ name, image: s.image, created_at: s.created_at })),
      volumes: [...volumes].map(([name, v]): CatalogItem => ({ name, created_at: v.created_at })),
    }),
    listForkImages: async () => [...forks].map(([name, f]): CatalogItem => ({ name, image: f.image, created_at: f.created_at })),
  };
}

/** Bytes in a tree (files only; links not followed). */
function treeSize(node: Node): number {
  if (node.kind === 'file') return node.data.byteLength;
  if (node.kind === 'link') return 0;
  let total = 0;
  for (const child of node.children.values()) total += treeSize(child);
  return total;
}

/**
 * A pool tenant's workspace (DESIGN §8), isolation `paths`: the file operations work on a view
 * rooted at `/workspace/<name>` (its links resolve inside it); exec starts there.
 */
function memoryWorkspace(provider: Provider, get: (id: string) => Runtime, id: string, ws: WorkspaceSpec): WorkspaceOps {
  const inRuntime = workspacePath(ws);
  const view = (): MemoryFs => {
    const rt = get(id);
    const node = rt.fs.lookup(inRuntime, false);
    if (node?.kind !== 'dir') throw notFound(`workspace ${ws.name} not found`);
    const fs = new MemoryFs(rt.fs.now, node);
    // The runtime's watches see a tenant's changes at their runtime paths.
    fs.onChange = (c) =>
      rt.fs.onChange?.(
        c.type === 'rename'
          ? { ...c, path: `${inRuntime}${c.path}`, old_path: `${inRuntime}${c.old_path}` }
          : { ...c, path: `${inRuntime}${c.path === '/' ? '' : c.path}` },
      );
    return fs;
  };
  return {
    isolation: 'paths',
    async prepare() {
      const fs = get(id).fs;
      if (fs.lookup(inRuntime, false) === undefined) fs.mkdirs(inRuntime, 0o700);
    },
    async remove() {
      try {
        get(id).fs.deleteFile(inRuntime, true);
      } catch (err) {
        if (!(isSbxError(err) && err.code === 'not_found')) throw err;
      }
    },
    exec: (spec, signal) =>
      provider.exec(id, { ...spec, workdir: `${inRuntime}${spec.workdir && spec.workdir !== '/' ? spec.workdir : ''}` }, signal),
    writeFile: async (p, content, mode) => view().writeFile(p, content, mode),
    readFile: async (p, _signal, maxBytes) => view().readFile(p, maxBytes),
    deleteFile: async (p, recursive) => view().deleteFile(p, recursive),
    listFiles: async (p) => view().listFiles(p),
    moveFile: async (from, to) => view().moveFile(from, to),
    chmod: async (p, mode) => view().chmod(p, mode),
    stat: async (p) => view().stat(p),
    glob: async (pattern) => view().glob(pattern),
  };
}

/**
 * One exec: validated before it starts (a missing runtime or workdir throws), then the script
 * runs as promises while this generator yields its output; the consumer stopping, the signal or
 * the runtime's destroy kills it and every job it started.
 */
async function* execIn(get: (id: string) => Runtime, id: string, spec: ExecSpec, signal: AbortSignal): AsyncGenerator<ExecEvent> {
  const rt = get(id);
  if (spec.mode === 'argv' && spec.command.length === 0) throw badRequest('command is empty');
  for (const [k, v] of Object.entries(spec.env)) {
    if (k.length === 0 || k.includes('=') || k.includes('\0')) throw badRequest(`invalid environment variable name ${JSON.stringify(k)}`);
    if (v.includes('\0')) throw badRequest(`environment variable ${k} must not contain NUL bytes`);
  }
  const cwd = spec.workdir ?? '/workspace';
  if (rt.fs.lookup(cwd)?.kind !== 'dir') throw badRequest(`workdir ${cwd} is not an existing directory in the sandbox`);

  const kill = new Kill();
  rt.execs.add(kill);
  let queued = 0;
  let drained: (() => void) | null = null;
  const queue = new AsyncQueue<ExecEvent>({
    onShift: (ev) => {
      if (ev.stream === 'exit') return;
      queued -= ev.data.byteLength;
      if (queued <= OUTPUT_HIGH_WATER) drained?.();
    },
  });
  const output = (stream: 'stdout' | 'stderr'): Output => ({
    async write(chunk) {
      kill.check();
      if (chunk.byteLength === 0) return;
      const data = chunk.slice();
      rt.ring.append(data, stream);
      queued += data.byteLength;
      queue.push({ stream, data });
      while (queued > OUTPUT_HIGH_WATER && !kill.killed) await kill.race(new Promise<void>((r) => (drained = r)));
    },
  });
  const live = spec.stdin !== undefined && !(spec.stdin instanceof Uint8Array) ? liveInput(spec.stdin, kill) : null;
  const io: Streams = {
    stdin: live ?? (spec.stdin instanceof Uint8Array ? bytesInput(spec.stdin) : EMPTY_INPUT),
    stdout: output('stdout'),
    stderr: output('stderr'),
  };
  const env = new Map<string, string>([
    ['PATH', DEFAULT_PATH],
    ['HOME', '/workspace'],
    ['PWD', cwd],
  ]);
  for (const [k, v] of Object.entries(spec.env)) env.set(k, v);
  const proc: Proc = { fs: rt.fs, kill, env, cwd, args: ['sh'], status: 0, io, jobs: [] };

  const onAbort = () => kill.kill(KILLED);
  if (signal.aborted) onAbort();
  signal.addEventListener('abort', onAbort, { once: true });
  const controls = spec.controls?.[Symbol.asyncIterator]();
  if (controls)
    void (async () => {
      for (let r = await controls.next(); !r.done; r = await controls.next()) {
        const c = r.value;
        if (c.type === 'signal' && EXEC_SIGNALS.includes(c.signal)) kill.kill(128 + SIGNO[c.signal]);
      }
    })().catch(() => undefined);

  const main =
    spec.mode === 'shell' ? runScript(proc, buildShellCommand(spec.command, spec.args)) : runArgv(proc, [spec.command, ...spec.args], io);
  void main
    .catch((err: unknown) => {
      if (err instanceof Killed || err instanceof ExitShell) return err.code;
      if (err instanceof BrokenPipe) return 141;
      queue.push({ stream: 'stderr', data: new TextEncoder().encode(`sh: ${(err as Error).message}\n`) });
      return 2;
    })
    .then((code) => {
      rt.ring.flush();
      queue.push({ stream: 'exit', exit_code: kill.killed ? ((kill.signal.reason as Killed).code ?? code) : code });
      queue.end();
      // The command's jobs end with it, as a PID namespace's processes do with its init.
      kill.kill(KILLED);
    });
  try {
    yield* queue;
  } finally {
    kill.kill(KILLED);
    signal.removeEventListener('abort', onAbort);
    live?.release();
    void Promise.resolve(controls?.return?.()).catch(() => undefined);
    rt.execs.delete(kill);
  }
}
