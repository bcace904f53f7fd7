import { badRequest, conflict, isAbortError, isSbxError, notFound, SbxError, unavailable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type {
  Clock,
  ExecSignal,
  ExecSpec,
  IdSource,
  OutputChunk,
  OutputStream,
  ProcessLog,
  ProcessLogs,
  ProcessRecord,
  ProcessState,
  ProcessStore,
  Provider,
} from '../ports/index.js';
import type { Caller } from './caller.js';
import { checkStartOptions, ProcessInput, type ProcessStartOptions } from './process-input.js';
import { checkWorkdir, commandEnv, startDeadline, type ExecCommand, type ExecService } from './exec.js';
import { sandboxPath } from './paths.js';
import { buildShellCommand } from '../../shared/shell.js';
import {
  cleanupScript,
  drainScript,
  followScript,
  launchScript,
  runScript,
  shellSpec,
  signalScript,
  statusScript,
} from './process-scripts.js';
import type { SandboxService } from './service.js';

/** Running background processes per sandbox (more → resource_limit). */
export const MAX_RUNNING_PER_SANDBOX = 32;
/** Bytes of output one read of the log returns at most. */
const READ_BYTES = 256 * 1024;
/** Bound on the short helper execs (launch, drain, status, signal) in a detached process's sandbox. */
const SCRIPT_TIMEOUT_MS = 30_000;
/** Pause before following a detached process again after its follower failed. */
const RETRY_MS = 1_000;
/** How long a kill waits for the process to end before it answers with the record as it is. */
const KILL_WAIT_MS = 10_000;
/** An attached process that ignores SIGKILL's delivery (a provider that cannot signal) is cut off after this. */
const KILL_GRACE_MS = 2_000;

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

interface Live {
  rec: ProcessRecord;
  log: ProcessLog;
  /** Aborted on shutdown: stops following (a detached process runs on). */
  ac: AbortController;
  /** An attached process's live input: stdin (when started with it), resize and signals. */
  input?: ProcessInput;
  waiters: Set<() => void>;
  /** Set by a kill or the deadline: the state the process ends in. */
  ending?: 'killed' | 'timeout';
  stopTimer?: () => void;
  done?: Promise<void>;
}

const INTERNAL: Caller = { owner_id: null, admin: true };

/**
 * Background processes (DESIGN.md §10): commands that run on after the request that started them,
 * with their output kept (16 MiB per process) and read from any byte offset, so a client that
 * reconnects with its last offset loses nothing. On providers with the `detach` capability (docker)
 * a process runs in its own session inside the sandbox, writing its output to files there, and this
 * service follows those files: it survives a control-plane restart and is followed again by
 * `resume()`. Elsewhere it is an exec this service holds open, ended by a shutdown.
 */
export class ProcessService {
  private readonly live = new Map<string, Live>();
  private closed = false;

  constructor(private readonly deps: ProcessDeps) {}

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
        await this.launch(provider, runtimeId, rec, spec);
      } catch (err) {
        // Nothing half-made: no record, no log.
        await this.deps.store.deleteProcess(rec.id).catch(() => false);
        await log.close().catch(() => undefined);
        await this.deps.logs.remove(rec.id).catch(() => undefined);
        throw err;
      }
    }
    const live = this.track(rec, log);
    if (rec.runner === 'attached') {
      // A terminal always takes input (what is typed at it).
      live.input = new ProcessInput(rec.id, opts.stdin === true || opts.pty !== undefined, opts.pty !== undefined);
      if (live.input.stdin) spec.stdin = live.input.stdin;
      if (opts.pty) spec.tty = opts.pty;
    }
    live.done = rec.runner === 'detached' ? this.follow(live) : this.runAttached(live, provider, runtimeId, spec);
    this.publish(rec, 'process.started', { program: programOf(rec) });
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
            await self.waitForOutput(now, 1_000);
            if (self.closed) return;
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
    const live = this.running(rec);
    await this.deliver(live, signal);
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

  /** Resizes the terminal of a process started with `pty`. */
  async resize(sandboxId: string, processId: string, cols: number, rows: number, caller: Caller): Promise<void> {
    this.inputOf(await this.get(sandboxId, processId, caller)).resize(cols, rows);
  }

  /** Whether a running process was started with a terminal (its output is the terminal's). */
  hasTerminal(processId: string): boolean {
    return this.live.get(processId)?.input?.pty === true;
  }

  private inputOf(rec: ProcessRecord): ProcessInput {
    const live = this.running(rec);
    if (!live.input) throw conflict(`process ${rec.id} was started without stdin or a terminal`);
    return live.input;
  }

  /** Kills the process (SIGKILL to all of it); answers once it ended, or after 10 s with the record as it is. */
  async kill(sandboxId: string, processId: string, caller: Caller): Promise<ProcessRecord> {
    const rec = await this.get(sandboxId, processId, caller);
    if (rec.state !== 'running') return rec;
    const live = this.running(rec);
    live.ending ??= 'killed';
    await this.deliver(live, 'SIGKILL');
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
      if (this.live.has(rec.id)) continue;
      const log = await this.deps.logs.open(rec.id, true);
      if (rec.runner !== 'detached' || !log) {
        await log?.close();
        await this.end(rec, 'killed', null);
        continue;
      }
      const live = this.track(rec, log);
      live.done = this.follow(live);
    }
  }

  /** Forgets the processes (records and logs) of sandboxes that are gone; returns how many. */
  async sweep(): Promise<number> {
    let removed = 0;
    const gone = new Map<string, boolean>();
    for (const rec of await this.deps.store.listProcesses()) {
      if (rec.holder !== this.deps.holder || this.live.has(rec.id)) continue;
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

  /** Stops following: detached processes run on (and are resumed by the next start), attached ones end. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.live.values()];
    for (const live of all) {
      live.stopTimer?.();
      live.ac.abort(new Error('shutting down'));
      for (const w of live.waiters) w();
    }
    await Promise.allSettled(all.map((l) => l.done));
  }

  // ---------------------------------------------------------------- running

  private track(rec: ProcessRecord, log: ProcessLog): Live {
    const live: Live = { rec, log, ac: new AbortController(), waiters: new Set() };
    this.live.set(rec.id, live);
    if (rec.deadline_at !== null) {
      const left = Date.parse(rec.deadline_at) - this.deps.clock.now().getTime();
      live.stopTimer = startDeadline(Math.max(0, left), () => {
        live.ending ??= 'timeout';
        void this.deliver(live, 'SIGKILL').catch(() => undefined);
      });
    }
    return live;
  }

  private running(rec: ProcessRecord): Live {
    const live = this.live.get(rec.id);
    if (live) return live;
    if (rec.state !== 'running') throw conflict(`process ${rec.id} has ended (${rec.state})`);
    throw unavailable(`process ${rec.id} is followed by replica ${rec.holder}; ask that replica`);
  }

  private async deliver(live: Live, signal: ExecSignal): Promise<void> {
    if (live.rec.runner === 'attached') {
      live.input?.controls.push({ type: 'signal', signal });
      if (signal === 'SIGKILL') setTimeout(() => live.ac.abort(new Error('killed')), KILL_GRACE_MS).unref?.();
      return;
    }
    const { provider, runtimeId } = await this.deps.sandboxes.resolveRuntime(live.rec.sandbox_id, INTERNAL);
    await runScript(provider, runtimeId, signalScript(live.rec.id, signal.replace(/^SIG/, '')));
  }

  private async launch(provider: Provider, runtimeId: string, rec: ProcessRecord, spec: ExecSpec): Promise<void> {
    const argv = spec.mode === 'argv' ? [spec.command, ...spec.args] : ['sh', '-c', buildShellCommand(spec.command, spec.args)];
    const script = launchScript(rec.id, argv);
    const r = await runScript(provider, runtimeId, script, { env: spec.env, workdir: spec.workdir });
    if (r.code === 0) return;
    if (r.code === 120) throw new SbxError('provider_error', 'cannot start a background process: /tmp in the sandbox is not writable');
    throw new SbxError('provider_error', `cannot start a background process (exit ${r.code}): the image needs sh, setsid and tail`);
  }

  /** Follows a detached process until it ends, reconnecting while its sandbox lives. */
  private async follow(live: Live): Promise<void> {
    const id = live.rec.id;
    let warned = false;
    while (!live.ac.signal.aborted) {
      let target: { provider: Provider; runtimeId: string };
      try {
        // A follower is no activity: it never wakes a paused sandbox (it waits for the resume).
        target = await this.deps.sandboxes.resolveRuntime(live.rec.sandbox_id, INTERNAL, { resume: false });
      } catch (err) {
        if (isSbxError(err) && err.code === 'not_found') return this.finish(live, 'killed', null);
        await pause(RETRY_MS, live.ac.signal);
        continue;
      }
      try {
        await this.copy(live, target.provider.exec(target.runtimeId, shellSpec(followScript(id, live.log.counts)), live.ac.signal));
        if (live.ac.signal.aborted) return;
        await this.copy(
          live,
          target.provider.exec(target.runtimeId, shellSpec(drainScript(id, live.log.counts)), AbortSignal.timeout(SCRIPT_TIMEOUT_MS)),
        );
        const status = (await runScript(target.provider, target.runtimeId, statusScript(id))).stdout.trim();
        if (status === 'running') continue;
        const m = /^exit (\d+)$/.exec(status);
        await runScript(target.provider, target.runtimeId, cleanupScript(id)).catch(() => undefined);
        return this.finish(live, m ? 'exited' : 'killed', m ? Number(m[1]) : null);
      } catch (err) {
        if (live.ac.signal.aborted) return;
        if (!warned)
          this.deps.warn?.(
            { process_id: id, sandbox_id: live.rec.sandbox_id, err: isSbxError(err) ? err.message : String(err) },
            'following a background process failed; retrying',
          );
        warned = true;
        await pause(RETRY_MS, live.ac.signal);
      }
    }
  }

  private async runAttached(live: Live, provider: Provider, runtimeId: string, spec: ExecSpec): Promise<void> {
    const input = live.input ?? new ProcessInput(live.rec.id, false, false);
    live.input = input;
    let code: number | null = null;
    try {
      for await (const ev of provider.exec(runtimeId, { ...spec, controls: input.controls }, live.ac.signal)) {
        if (ev.stream === 'exit') code = ev.exit_code;
        else await this.append(live, ev.stream, ev.data);
      }
    } catch (err) {
      if (!live.ac.signal.aborted && !isAbortError(err))
        this.deps.warn?.({ process_id: live.rec.id, err: isSbxError(err) ? err.message : String(err) }, 'background process failed');
    } finally {
      input.end();
    }
    await this.finish(live, live.ac.signal.aborted && !live.ending ? 'killed' : code === null ? 'killed' : 'exited', code);
  }

  private async copy(live: Live, events: AsyncIterable<{ stream: string; data?: Uint8Array }>): Promise<void> {
    for await (const ev of events) {
      if ((ev.stream === 'stdout' || ev.stream === 'stderr') && ev.data && ev.data.byteLength > 0)
        await this.append(live, ev.stream, ev.data);
    }
  }

  private async append(live: Live, stream: OutputStream, data: Uint8Array): Promise<void> {
    await live.log.append(stream, data);
    this.wake(live);
  }

  private wake(live: Live): void {
    const waiters = [...live.waiters];
    live.waiters.clear();
    for (const w of waiters) w();
  }

  private waitForOutput(live: Live | null, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        live?.waiters.delete(done);
        resolve();
      }
      live?.waiters.add(done);
    });
  }

  private async finish(live: Live, state: ProcessState, code: number | null): Promise<void> {
    live.stopTimer?.();
    const final: ProcessState = live.ending ?? state;
    try {
      live.rec = await this.end(live.rec, final, code);
    } finally {
      this.live.delete(live.rec.id);
      this.wake(live);
      await live.log.close().catch(() => undefined);
    }
  }

  private async end(rec: ProcessRecord, state: ProcessState, code: number | null): Promise<ProcessRecord> {
    const patch = { state, exit_code: code, ended_at: this.deps.clock.now().toISOString() };
    const updated = (await this.deps.store.updateProcess(rec.id, patch)) ?? { ...rec, ...patch };
    this.publish(updated, 'process.ended', { program: programOf(updated), state, exit_code: code });
    return updated;
  }

  private publish(rec: ProcessRecord, type: 'process.started' | 'process.ended', data: Record<string, unknown>): void {
    const sb = this.deps.sandboxes;
    void sb.deps.store
      .getSandbox(rec.sandbox_id)
      .then((s) =>
        this.deps.bus.publish({
          type,
          sandbox_id: rec.sandbox_id,
          owner_id: s?.owner_id ?? undefined,
          worker_id: s?.worker_id,
          data: { process_id: rec.id, ...data },
        }),
      )
      .catch(() => undefined);
  }
}

/** Event data names the program only: arguments and env may carry secrets. */
function programOf(rec: ProcessRecord): string {
  if (rec.mode === 'argv') return rec.command;
  return (
    rec.command
      .trim()
      .split(/\s+/)
      .find((t) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(t)) ?? ''
  );
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
