/**
 * The background processes this replica follows (DESIGN.md §10): a detached process's output
 * files followed in its sandbox until it ends (reconnecting while the sandbox lives), an attached
 * one's exec held open, their logs appended, readers woken, the end recorded and published.
 * ProcessService's running side; it holds no SandboxService, only the runtime resolver.
 */
import { conflict, isAbortError, isSbxError, SbxError, unavailable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type {
  Clock,
  ExecSignal,
  ExecSpec,
  OutputStream,
  ProcessLog,
  ProcessRecord,
  ProcessState,
  ProcessStore,
  Provider,
  SandboxRecord,
} from '../ports/index.js';
import { buildShellCommand } from '../../shared/shell.js';
import type { Caller } from './caller.js';
import { startDeadline } from './exec.js';
import { ProcessInput } from './process-input.js';
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
import type { ResolveRuntime } from './runtimes.js';

/** Bound on the short helper execs (launch, drain, status, signal) in a detached process's sandbox. */
const SCRIPT_TIMEOUT_MS = 30_000;
/** Pause before following a detached process again after its follower failed. */
const RETRY_MS = 1_000;
/** An attached process that ignores SIGKILL's delivery (a provider that cannot signal) is cut off after this. */
const KILL_GRACE_MS = 2_000;

/** The caller of a replica's own follow-up operations: sees every sandbox. */
const INTERNAL: Caller = { owner_id: null, admin: true };

export interface LiveDeps {
  store: ProcessStore;
  clock: Clock;
  bus: EventBus;
  /** The running sandbox of a process, with its provider. */
  resolveRuntime: ResolveRuntime;
  /** The sandbox's row as stored, whatever its state (events name its owner and worker). */
  sandboxOf(id: string): Promise<SandboxRecord | null>;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

export interface Live {
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

export class LiveProcesses {
  private readonly live = new Map<string, Live>();
  /** Set by `close()`: followers stop and readers end. */
  closed = false;

  constructor(private readonly deps: LiveDeps) {}

  /** The process this replica follows, if it does. */
  get(id: string): Live | undefined {
    return this.live.get(id);
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

  /** Starts following a process: its record, its log and its deadline (SIGKILL when it passes). */
  track(rec: ProcessRecord, log: ProcessLog): Live {
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

  /** The followed process of a running record; 409 once it ended, 503 when another replica follows it. */
  running(rec: ProcessRecord): Live {
    const live = this.live.get(rec.id);
    if (live) return live;
    if (rec.state !== 'running') throw conflict(`process ${rec.id} has ended (${rec.state})`);
    throw unavailable(`process ${rec.id} is followed by replica ${rec.holder}; ask that replica`);
  }

  /** A signal to every process of the command: through an attached exec's controls, or a script in the sandbox. */
  async deliver(live: Live, signal: ExecSignal): Promise<void> {
    if (live.rec.runner === 'attached') {
      live.input?.controls.push({ type: 'signal', signal });
      if (signal === 'SIGKILL') setTimeout(() => live.ac.abort(new Error('killed')), KILL_GRACE_MS).unref?.();
      return;
    }
    const { provider, runtimeId } = await this.deps.resolveRuntime(live.rec.sandbox_id, INTERNAL);
    await runScript(provider, runtimeId, signalScript(live.rec.id, signal.replace(/^SIG/, '')));
  }

  /** Starts a detached process in its own session inside the sandbox, its output going to files there. */
  async launch(provider: Provider, runtimeId: string, rec: ProcessRecord, spec: ExecSpec): Promise<void> {
    const argv = spec.mode === 'argv' ? [spec.command, ...spec.args] : ['sh', '-c', buildShellCommand(spec.command, spec.args)];
    const script = launchScript(rec.id, argv);
    const r = await runScript(provider, runtimeId, script, { env: spec.env, workdir: spec.workdir });
    if (r.code === 0) return;
    if (r.code === 120) throw new SbxError('provider_error', 'cannot start a background process: /tmp in the sandbox is not writable');
    throw new SbxError('provider_error', `cannot start a background process (exit ${r.code}): the image needs sh, setsid and tail`);
  }

  /** Follows a detached process until it ends, reconnecting while its sandbox lives. */
  async follow(live: Live): Promise<void> {
    const id = live.rec.id;
    let warned = false;
    while (!live.ac.signal.aborted) {
      let target: { provider: Provider; runtimeId: string };
      try {
        // A follower is no activity: it never wakes a paused sandbox (it waits for the resume).
        target = await this.deps.resolveRuntime(live.rec.sandbox_id, INTERNAL, { resume: false });
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

  /** Runs an attached process as one exec held open, its output appended, until it ends or is cut off. */
  async runAttached(live: Live, provider: Provider, runtimeId: string, spec: ExecSpec): Promise<void> {
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

  /** Resolves on the process's next output or end, or after `ms` (a reader waiting at the end of the log). */
  waitForOutput(live: Live | null, ms: number): Promise<void> {
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

  /** Records the end and publishes `process.ended`. */
  async end(rec: ProcessRecord, state: ProcessState, code: number | null): Promise<ProcessRecord> {
    const patch = { state, exit_code: code, ended_at: this.deps.clock.now().toISOString() };
    const updated = (await this.deps.store.updateProcess(rec.id, patch)) ?? { ...rec, ...patch };
    this.publish(updated, 'process.ended', { program: programOf(updated), state, exit_code: code });
    return updated;
  }

  /** Publishes a process event with its sandbox's owner and worker (read from the store, never failing the caller). */
  publish(rec: ProcessRecord, type: 'process.started' | 'process.ended', data: Record<string, unknown>): void {
    void this.deps
      .sandboxOf(rec.sandbox_id)
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
export function programOf(rec: ProcessRecord): string {
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
