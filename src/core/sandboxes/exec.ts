import { parseDuration } from '../duration.js';
import { formatDuration } from '../../shared/duration.js';
import { asProviderError, badRequest, isAbortError, isSbxError, SbxError } from '../errors.js';
import { reportExecFailure } from '../events/failures.js';
import type { ExecControl, ExecSpec, Provider, SandboxRecord } from '../ports/index.js';
import type { Caller } from './caller.js';
import { CappedOutput } from './exec-output.js';
import { sandboxPath } from './paths.js';
import { isSandboxGone } from './runtime-guard.js';
import type { SandboxService } from './service.js';

/**
 * The command core runs for an exec request (the API's ExecRequest after decoding; the client
 * library's ExecInput is what a caller passes): with live stdin and controls for interactive use.
 */
export interface ExecCommand {
  command: string;
  args?: string[];
  env?: Record<string, string>;
  workdir?: string;
  timeout?: string;
  mode?: 'shell' | 'argv';
  /** Bytes fed then EOF, or a live stream (WebSocket exec) written chunk by chunk as it arrives. */
  stdin?: Uint8Array | AsyncIterable<Uint8Array>;
  /** A terminal of this size, where the provider has the `tty` capability. */
  tty?: { cols: number; rows: number };
  /** Resize and signal requests while the command runs. */
  controls?: AsyncIterable<ExecControl>;
  /** Run as this uid/gid of the sandbox (E2B's calling user, DESIGN.md §14); absent: the runtime's own user. */
  user?: { uid: number; gid: number };
}

/**
 * One item of an exec stream: output bytes as the command wrote them (a UTF-8 character may be
 * split across items), then exactly one `exit` record last. The transports decide how bytes travel.
 */
export type ExecItem =
  | { stream: 'stdout' | 'stderr'; data: Uint8Array }
  | { stream: 'exit'; exit_code: number | null; duration_ms: number; timed_out: boolean };

/** A finished buffered exec. A deadline is `timed_out` (exit 124) with the output until then. */
export interface BufferedExecResult {
  exit_code: number;
  stdout: Uint8Array;
  stderr: Uint8Array;
  duration: string;
  truncated?: boolean;
  timed_out: boolean;
}

export const TIMEOUT_EXIT_CODE = 124;

/**
 * A byte budget shared with the transport (the HTTP in-flight budget): a buffered exec takes what it
 * holds as it collects output and gives it all back when done. A take may wait for room (the
 * command is not read meanwhile, so it waits too); false refuses it.
 */
export interface ByteBudget {
  take(n: number): boolean | Promise<boolean>;
  give(n: number): void;
}

/** The longest delay a Node timer holds (2^31-1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `onExpire` after `ms`, however long: delays past what one timer holds re-arm in steps of
 * at most `step`. Returns the cancel function.
 */
export function startDeadline(ms: number, onExpire: () => void, step = MAX_TIMER_MS): () => void {
  let timer: ReturnType<typeof setTimeout>;
  const arm = (left: number) => {
    timer = left > step ? setTimeout(() => arm(left - step), step) : setTimeout(onExpire, left);
  };
  arm(ms);
  return () => clearTimeout(timer);
}

const encoder = new TextEncoder();

/**
 * The environment of a sandbox's command: the sandbox's own (DESIGN.md §14), its secrets'
 * placeholders read from its bindings (§15), then the request's.
 */
export async function commandEnv(
  sandboxes: SandboxService,
  rec: SandboxRecord,
  requested: Record<string, string> | undefined,
): Promise<Record<string, string>> {
  const placeholders = (await sandboxes.deps.secrets?.placeholderEnv(rec.id, rec.env)) ?? {};
  return { ...(rec.env ?? {}), ...placeholders, ...(requested ?? {}) };
}

/**
 * Command execution (spec 4.1 exec rules). Limits are checked before anything runs, so an HTTP
 * stream can still answer with a status code; deadlines kill the command and are reported as
 * `exec.timeout` plus a stderr line, caller cancellation is not.
 */
export class ExecService {
  constructor(private readonly sandboxes: SandboxService) {}

  /** Validates and resolves everything; the returned iterable runs the command when iterated. */
  async start(id: string, input: ExecCommand, caller: Caller, signal?: AbortSignal, buffered = false): Promise<AsyncIterable<ExecItem>> {
    if (typeof input.command !== 'string' || input.command.length === 0) throw badRequest('command is required');
    const { rec, provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    const timeoutMs = await this.timeoutFor(rec, input.timeout);
    const spec: ExecSpec = {
      command: input.command,
      args: input.args ?? [],
      mode: input.mode ?? 'shell',
      env: await commandEnv(this.sandboxes, rec, input.env),
      workdir: input.workdir !== undefined ? sandboxPath(input.workdir, 'workdir') : undefined,
      stdin: input.stdin,
    };
    if (input.tty !== undefined) spec.tty = terminalSize(input.tty.cols, input.tty.rows);
    if (input.controls !== undefined) spec.controls = input.controls;
    if (input.user !== undefined) spec.user = input.user;
    // `run` collects everything before answering: a backend with a one-shot call may use it (DESIGN §12).
    if (buffered) spec.buffered = true;
    if (spec.workdir !== undefined) await checkWorkdir(provider, runtimeId, spec.workdir, signal);
    const { bus } = this.sandboxes.deps;
    const activity = this.sandboxes.pauses.activity;
    const common = { sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
    // Event data names the program only: arguments and env may carry secrets.
    // Leading `NAME=value` shell assignments are env values, never part of the program name.
    const program =
      spec.mode === 'argv'
        ? spec.command
        : (spec.command
            .trim()
            .split(/\s+/)
            .find((t) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(t)) ?? '');

    return {
      [Symbol.asyncIterator]: async function* (): AsyncGenerator<ExecItem> {
        const ac = new AbortController();
        // In flight (DESIGN.md §16): an explicit pause answers 409 and auto-pause waits until it ends.
        const ended = activity.begin(rec.id);
        let timedOut = false;
        const onCancel = () => ac.abort(signal?.reason);
        if (signal?.aborted) onCancel();
        signal?.addEventListener('abort', onCancel, { once: true });
        const stopTimer =
          timeoutMs > 0
            ? startDeadline(timeoutMs, () => {
                timedOut = true;
                ac.abort(new Error('deadline'));
              })
            : undefined;
        const started = performance.now();
        let exitCode: number | null = null;
        let finished = false;
        bus.publish({ type: 'exec.started', ...common, data: { program, mode: spec.mode, provider: rec.provider } });
        try {
          try {
            for await (const ev of provider.exec(runtimeId, spec, ac.signal)) {
              if (ev.stream === 'exit') {
                exitCode = ev.exit_code;
                continue;
              }
              if (ev.data.byteLength > 0) yield { stream: ev.stream, data: ev.data };
            }
          } catch (err) {
            if (!timedOut && (ac.signal.aborted || isAbortError(err))) throw err;
            if (!timedOut) {
              const e = asProviderError(err, `exec failed on provider ${rec.provider}`);
              reportExecFailure(bus, { ...common, provider: rec.provider }, program, { code: e.code, message: e.message });
              throw e;
            }
          }
          const duration_ms = Math.round(performance.now() - started);
          if (timedOut) {
            bus.publish({ type: 'exec.timeout', ...common, data: { program, timeout: formatDuration(timeoutMs), duration_ms } });
            yield { stream: 'stderr', data: encoder.encode(`sbx: command timed out after ${formatDuration(timeoutMs)}\n`) };
            finished = true;
            yield { stream: 'exit', exit_code: TIMEOUT_EXIT_CODE, duration_ms, timed_out: true };
            return;
          }
          if (ac.signal.aborted) throw new SbxError('unavailable', 'exec cancelled');
          const code = exitCode;
          bus.publish({ type: 'exec.completed', ...common, data: { program, exit_code: code, duration_ms } });
          finished = true;
          yield { stream: 'exit', exit_code: code, duration_ms, timed_out: false };
        } finally {
          ended();
          stopTimer?.();
          signal?.removeEventListener('abort', onCancel);
          // The consumer went away (client disconnected): kill the command.
          if (!finished && !ac.signal.aborted) ac.abort(new Error('consumer stopped'));
        }
      },
    };
  }

  /**
   * Runs to completion and collects output, at most `max_exec_output_bytes` per stream (cut at a
   * character boundary, with a note of what was dropped).
   */
  async run(id: string, input: ExecCommand, caller: Caller, signal?: AbortSignal, budget?: ByteBudget): Promise<BufferedExecResult> {
    const items = await this.start(id, input, caller, signal, true);
    let taken = 0;
    try {
      return await this.collect(items, async (n) => {
        const ok = budget ? budget.take(n) : true;
        if (ok === false || (ok !== true && !(await ok))) {
          // Leaving the loop stops (kills) the command.
          throw new SbxError('unavailable', 'the server holds too much buffered output right now; retry later or use stream=true', {
            retry_after_s: 1,
          });
        }
        taken += n;
      });
    } finally {
      budget?.give(taken);
    }
  }

  private async collect(items: AsyncIterable<ExecItem>, hold: (n: number) => Promise<void>): Promise<BufferedExecResult> {
    const output = new CappedOutput(this.sandboxes.deps.settings.limits.max_exec_output_bytes);
    for await (const item of items) {
      if (item.stream === 'exit') {
        const result: BufferedExecResult = {
          exit_code: item.exit_code ?? -1,
          stdout: output.result('stdout'),
          stderr: output.result('stderr'),
          duration: formatDuration(item.duration_ms),
          timed_out: item.timed_out,
        };
        if (output.truncated) result.truncated = true;
        return result;
      }
      // Whole chunks up to the first past the limit; `result` cuts there.
      if (output.wants(item.stream, item.data)) {
        await hold(item.data.byteLength);
        output.keep(item.stream, item.data);
      }
    }
    throw new SbxError('provider_error', 'exec ended without an exit status');
  }

  /**
   * Request timeout bounded by the owner's max and the global max; none → the default exec timeout,
   * else the max (`fallback: 'default'`), or no deadline at all (`'none'`: a background process
   * lives as long as its sandbox unless it asks for one). 0 = none.
   */
  async timeoutFor(rec: SandboxRecord, timeout: string | undefined, fallback: 'default' | 'none' = 'default'): Promise<number> {
    const limits = await this.sandboxes.deps.admission.limitsFor(rec.owner_id);
    const max = limits.max_exec_timeout_ms;
    if (timeout !== undefined) {
      const ms = parseDuration(timeout, 'timeout');
      if (ms < 0) throw badRequest('timeout must not be negative');
      if (max > 0 && ms > max) {
        const data = { reason: 'max_exec_timeout', operation: 'exec', requested: timeout, max: formatDuration(max) };
        this.sandboxes.deps.bus.publish({ type: 'resource.limit', sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, data });
        throw new SbxError('resource_limit', `timeout ${timeout} exceeds the maximum exec timeout of ${formatDuration(max)}`, {
          reason: 'max_exec_timeout',
        });
      }
      if (ms > 0) return ms;
    }
    if (fallback === 'none') return 0;
    const def = this.sandboxes.deps.settings.defaults.default_exec_timeout_ms;
    if (def > 0) return max > 0 ? Math.min(def, max) : def;
    return max;
  }
}

/**
 * A workdir that is not an existing directory is a bad_request before anything runs, in the words
 * the providers use, so a streamed exec answers it with a status like the buffered one does.
 */
export async function checkWorkdir(provider: Provider, runtimeId: string, workdir: string, signal: AbortSignal | undefined): Promise<void> {
  let isDir: boolean;
  try {
    isDir = (await provider.stat(runtimeId, workdir, signal)).is_dir;
  } catch (err) {
    if (isAbortError(err) || isSandboxGone(err)) throw err;
    // Anything but "not there" or "not a directory": the provider reports it when the command starts.
    if (!isSbxError(err) || (err.code !== 'not_found' && err.code !== 'bad_request')) return;
    isDir = false;
  }
  if (!isDir) throw badRequest(`workdir ${workdir} is not an existing directory in the sandbox`);
}

/** Kept here too: other modules read it from exec.ts. */
export { concat } from './exec-output.js';

/** A terminal size: whole numbers of 1 to 65535 (what the kernel's winsize holds). */
export function terminalSize(cols: number, rows: number): { cols: number; rows: number } {
  const ok = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;
  if (!ok(cols) || !ok(rows)) throw badRequest('terminal cols and rows must be integers from 1 to 65535');
  return { cols, rows };
}
