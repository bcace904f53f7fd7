import { badRequest, conflict, notFound, SbxError, unavailable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type {
  Clock,
  ExecSignal,
  ExecSpec,
  IdSource,
  OutputChunk,
  ProcessLogs,
  ProcessRecord,
  ProcessState,
  ProcessStore,
} from '../ports/index.js';
import type { Caller } from './caller.js';
import { checkWorkdir, commandEnv, type ExecCommand, type ExecService } from './exec.js';
import { sandboxPath } from './paths.js';
import { checkStartOptions, ProcessInput, type ProcessStartOptions } from './process-input.js';
import { LiveProcesses, programOf } from './process-live.js';
import type { SandboxService } from './service.js';

/** Running background processes per sandbox (more → resource_limit). */
export const MAX_RUNNING_PER_SANDBOX = 32;
/** Bytes of output one read of the log returns at most. */
const READ_BYTES = 256 * 1024;
/** How long a kill waits for the process to end before it answers with the record as it is. */
const KILL_WAIT_MS = 10_000;

/** One item of a process's output: bytes at an offset, where dropped bytes resume, or the end. */
export type ProcessOutputItem =
  | OutputChunk
  | { stream: 'truncated'; offset: number }
  | { stream: 'exit'; offset: number; exit_code: number | null; state: ProcessState };

export interface ProcessDeps {
  sandboxes: SandboxService;
  exec: ExecService;
  store: ProcessStore;
  logs: ProcessLogs;
  clock: Clock;
  ids: IdSource;
  bus: EventBus;
  /** This control plane's replica id: the holder of the processes it starts. */
  holder: string;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

/**
 * Background processes (DESIGN.md §10): commands that run on after the request that started them,
 * with their output kept (16 MiB per process) and read from any byte offset, so a client that
 * reconnects with its last offset loses nothing. On providers with the `detach` capability (docker)
 * a process runs in its own session inside the sandbox, writing its output to files there, and this
 * service follows those files: it survives a control-plane restart and is followed again by
 * `resume()`. Elsewhere it is an exec this service holds open, ended by a shutdown.
 */
export class ProcessService {
  /** The processes this replica follows. */
  private readonly live: LiveProcesses;

  constructor(private readonly deps: ProcessDeps) {
    this.live = new LiveProcesses({
      ...deps,
      resolveRuntime: (id, caller, opts) => deps.sandboxes.resolveRuntime(id, caller, opts),
      sandboxOf: (id) => deps.sandboxes.deps.store.getSandbox(id),
    });
  }

  /** Stops following: detached processes run on (and are resumed by the next start), attached ones end. */
  close(): Promise<void> {
    return this.live.close();
  }

  async start(sandboxId: string, input: ExecCommand, caller: Caller, opts: ProcessStartOptions = {}): Promise<ProcessRecord> {
    if (typeof input.command !== 'string' || input.command.length === 0) throw badRequest('command is required');
    if (input.stdin !== undefined) throw badRequest('a background process takes its stdin through `stdin: true` and …/stdin');
    if (input.tty !== undefined) throw badRequest('a background process gets a terminal through `pty: {cols, rows}`');
    const { rec: sandbox, provider, runtimeId } = await this.deps.sandboxes.resolveRuntime(sandboxId, caller);
    checkStartOptions(provider, opts);
    const running = await this.deps.store.listProcesses({ sandbox_id: sandbox.id, states: ['running'] });
    if (running.length >= MAX_RUNNING_PER_SANDBOX) {
      throw new SbxError('resource_limit', `sandbox ${sandbox.id} already runs ${MAX_RUNNING_PER_SANDBOX} background processes`, {
        reason: 'max_processes',
      });
    }
    const timeoutMs = await this.deps.exec.timeoutFor(sandbox, input.timeout, 'none');
    const mode = input.mode ?? 'shell';
    const args = input.args ?? [];
    const workdir = input.workdir !== undefined ? sandboxPath(input.workdir, 'workdir') : undefined;
    if (workdir !== undefined) await checkWorkdir(provider, runtimeId, workdir, undefined);
    const now = this.deps.clock.now();
    const rec: ProcessRecord = {
      id: `p-${this.deps.ids.sandboxId().replace(/^sb-/, '')}`,
      sandbox_id: sandbox.id,
      command: input.command,
      args,
      mode,
      state: 'running',
      exit_code: null,
      started_at: now.toISOString(),
      ended_at: null,
      runner: provider.capabilities.includes('detach') && !opts.stdin && !opts.pty && !opts.attach ? 'detached' : 'attached',
      holder: this.deps.holder,
      deadline_at: timeoutMs > 0 ? new Date(now.getTime() + timeoutMs).toISOString() : null,
    };
    const log = await this.deps.logs.open(rec.id, true);
    if (!log) throw new SbxError('internal', 'the process output log could not be created');
    await this.deps.store.insertProcess(rec);
    // The sandbox's environment (DESIGN.md §14, §15: its secrets' placeholders), then the request's.
    const env = await commandEnv(this.deps.sandboxes, sandbox, input.env);
    const spec: ExecSpec = { command: input.command, args, mode, env, ...(workdir !== undefined ? { workdir } : {}) };
    if (opts.user) spec.user = opts.user;
    if (rec.runner === 'detached') {
      try {
        await this.live.launch(provider, runtimeId, rec, spec);
      } catch (err) {
        // Nothing half-made: no record, no log.
        await this.deps.store.deleteProcess(rec.id).catch(() => false);
        await log.close().catch(() => undefined);
        await this.deps.logs.remove(rec.id).catch(() => undefined);
        throw err;
      }
    }
    const live = this.live.track(rec, log);
    if (rec.runner === 'attached') {
      // A terminal always takes input (what is typed at it).
      live.input = new ProcessInput(rec.id, opts.stdin === true || opts.pty !== undefined, opts.pty !== undefined);
      if (live.input.stdin) spec.stdin = live.input.stdin;
      if (opts.pty) spec.tty = opts.pty;
    }
    live.done = rec.runner === 'detached' ? this.live.follow(live) : this.live.runAttached(live, provider, runtimeId, spec);
    this.live.publish(rec, 'process.started', { program: programOf(rec) });
    return rec;
  }

  async list(sandboxId: string, caller: Caller): Promise<ProcessRecord[]> {
    const sandbox = await this.deps.sandboxes.get(sandboxId, caller);
    return (await this.deps.store.listProcesses({ sandbox_id: sandbox.id })).map((r) => this.live.get(r.id)?.rec ?? r);
  }

  /** The process of that sandbox (a process of another sandbox is not_found). */
  async get(sandboxId: string, processId: string, caller: Caller): Promise<ProcessRecord> {
    const sandbox = await this.deps.sandboxes.get(sandboxId, caller);
    const live = this.live.get(processId);
    if (live && live.rec.sandbox_id === sandbox.id) return live.rec;
    const rec = await this.deps.store.getProcess(processId);
    if (!rec || rec.sandbox_id !== sandbox.id) throw notFound(`process ${processId} not found in sandbox ${sandbox.id}`);
    return rec;
  }

  /**
   * The output from byte `offset`: the chunks kept from there (a `truncated` item first when older
   * bytes were dropped), then — once the process has ended — one `exit` item. With `follow` it
   * waits for more output until the end; without, it stops at the present end.
   */
  async output(
    sandboxId: string,
    processId: string,
    caller: Caller,
    query: { offset: number; follow: boolean },
  ): Promise<AsyncIterable<ProcessOutputItem>> {
    if (!Number.isSafeInteger(query.offset) || query.offset < 0) throw badRequest('offset must be a whole number of bytes, 0 or more');
    const rec = await this.get(sandboxId, processId, caller);
    const live = this.live.get(rec.id);
    const log = live?.log ?? (await this.deps.logs.open(rec.id, false));
    if (!log) {
      if (rec.holder !== this.deps.holder)
        throw unavailable(`the output of process ${rec.id} is kept by replica ${rec.holder}; ask that replica`);
      throw notFound(`the output of process ${rec.id} is gone`);
    }
    const self = this;
    return {
      async *[Symbol.asyncIterator](): AsyncGenerator<ProcessOutputItem> {
        let at = query.offset;
        // A followed stream is activity in flight (DESIGN.md §16); a one-off read is not.
        const ended = query.follow ? self.deps.sandboxes.pauses.activity.begin(rec.sandbox_id) : () => undefined;
        try {
          for (;;) {
            if (at < log.start) {
              yield { stream: 'truncated', offset: log.start };
              at = log.start;
            }
            const chunks = await log.read(at, READ_BYTES);
            if (chunks.length > 0) {
              for (const c of chunks) {
                if (c.offset > at) yield { stream: 'truncated', offset: c.offset };
                yield c;
                at = c.offset + c.data.byteLength;
              }
              continue;
            }
            // At the end of what is kept: the process ended (and everything it wrote is in), or wait.
            const now = self.live.get(rec.id) ?? null;
            const current = now ? now.rec : await self.deps.store.getProcess(rec.id);
            if (!current) return;
            if (current.state !== 'running' && !now) {
              yield { stream: 'exit', offset: Math.max(at, log.end), exit_code: current.exit_code, state: current.state };
              return;
            }
            if (!query.follow) return;
            await self.live.waitForOutput(now, 1_000);
            if (self.live.closed) return;
          }
        } finally {
          ended();
          if (!live) await log.close().catch(() => undefined);
        }
      },
    };
  }

  /** Sends a signal to every process of the command. */
  async signal(sandboxId: string, processId: string, signal: ExecSignal, caller: Caller): Promise<ProcessRecord> {
    const rec = await this.get(sandboxId, processId, caller);
    const live = this.live.running(rec);
    await this.live.deliver(live, signal);
    return live.rec;
  }

  /** Writes to the stdin of a process started with `stdin: true` (bounded backlog: 429 when it is not read). */
  async writeStdin(sandboxId: string, processId: string, data: Uint8Array, caller: Caller): Promise<void> {
    this.inputOf(await this.get(sandboxId, processId, caller)).write(data);
  }

  /** Ends the stdin of a process started with `stdin: true` (EOF once what is queued was read). */
  async closeStdin(sandboxId: string, processId: string, caller: Caller): Promise<void> {
    this.inputOf(await this.get(sandboxId, processId, caller)).close();
  }

  /** Resizes the terminal of a process started with `pty`; answers once the provider applied it. */
  async resize(sandboxId: string, processId: string, cols: number, rows: number, caller: Caller): Promise<void> {
    await this.inputOf(await this.get(sandboxId, processId, caller)).resize(cols, rows);
  }

  /** Whether a running process was started with a terminal (its output is the terminal's). */
  hasTerminal(processId: string): boolean {
    return this.live.get(processId)?.input?.pty === true;
  }

  private inputOf(rec: ProcessRecord): ProcessInput {
    const live = this.live.running(rec);
    if (!live.input) throw conflict(`process ${rec.id} was started without stdin or a terminal`);
    return live.input;
  }

  /** Kills the process (SIGKILL to all of it); answers once it ended, or after 10 s with the record as it is. */
  async kill(sandboxId: string, processId: string, caller: Caller): Promise<ProcessRecord> {
    const rec = await this.get(sandboxId, processId, caller);
    if (rec.state !== 'running') return rec;
    const live = this.live.running(rec);
    live.ending ??= 'killed';
    await this.live.deliver(live, 'SIGKILL');
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([live.done, new Promise((r) => (timer = setTimeout(r, KILL_WAIT_MS)))]);
    clearTimeout(timer);
    return live.rec;
  }

  /**
   * After a start: follows again the detached processes this replica held (their output picked up
   * where the log ends), and records as killed the attached ones, which ended with the last process.
   */
  async resume(): Promise<void> {
    for (const rec of await this.deps.store.listProcesses({ states: ['running'], holder: this.deps.holder })) {
      if (this.live.get(rec.id)) continue;
      const log = await this.deps.logs.open(rec.id, true);
      if (rec.runner !== 'detached' || !log) {
        await log?.close();
        await this.live.end(rec, 'killed', null);
        continue;
      }
      const live = this.live.track(rec, log);
      live.done = this.live.follow(live);
    }
  }

  /** Forgets the processes (records and logs) of sandboxes that are gone; returns how many. */
  async sweep(): Promise<number> {
    let removed = 0;
    const gone = new Map<string, boolean>();
    for (const rec of await this.deps.store.listProcesses()) {
      if (rec.holder !== this.deps.holder || this.live.get(rec.id)) continue;
      let isGone = gone.get(rec.sandbox_id);
      if (isGone === undefined) {
        const sb = await this.deps.sandboxes.deps.store.getSandbox(rec.sandbox_id);
        isGone = !sb || sb.state === 'destroyed' || sb.state === 'expired';
        gone.set(rec.sandbox_id, isGone);
      }
      if (!isGone) continue;
      await this.deps.logs.remove(rec.id);
      if (await this.deps.store.deleteProcess(rec.id)) removed++;
    }
    return removed;
  }
}
