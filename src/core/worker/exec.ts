/**
 * Running a command on one of a worker's runtimes: output as it comes, one exit last; a timeout
 * kills the command and ends with exit 124 and a note on stderr (the deadline is core's
 * `startDeadline`, as a local exec's); a closed call (the control plane went away, or its own
 * deadline) kills it too. The control plane's core does the limits, events and console capture:
 * the worker only runs.
 */
import { parseDuration } from '../duration.js';
import { isAbortError, isSbxError, SbxError } from '../errors.js';
import type { ExecSpec, Provider } from '../ports/index.js';
import { type ExecItem, startDeadline, TIMEOUT_EXIT_CODE } from '../sandboxes/exec.js';
import { formatDuration } from '../../shared/duration.js';

/** A timeout string as milliseconds; '' or absent = none. */
export function timeoutMs(timeout: string | undefined): number {
  return timeout === undefined || timeout === '' ? 0 : parseDuration(timeout, 'timeout');
}

export async function* runOnRuntime(
  provider: Provider,
  runtimeId: string,
  spec: ExecSpec,
  limitMs: number,
  signal: AbortSignal,
): AsyncGenerator<ExecItem> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(signal.reason);
  if (signal.aborted) onAbort();
  signal.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const stopTimer =
    limitMs > 0
      ? startDeadline(limitMs, () => {
          timedOut = true;
          ac.abort(new Error('deadline'));
        })
      : undefined;
  const started = performance.now();
  let exitCode = -1;
  let finished = false;
  try {
    try {
      for await (const ev of provider.exec(runtimeId, spec, ac.signal)) {
        if (ev.stream === 'exit') exitCode = ev.exit_code;
        else if (ev.data.byteLength > 0) yield { stream: ev.stream, data: ev.data };
      }
    } catch (err) {
      if (!timedOut) {
        if (ac.signal.aborted || isAbortError(err)) throw err;
        throw isSbxError(err) ? err : new SbxError('provider_error', `exec failed on provider ${provider.name}`);
      }
    }
    const duration_ms = Math.round(performance.now() - started);
    finished = true;
    if (timedOut) {
      yield { stream: 'stderr', data: new TextEncoder().encode(`sbx: command timed out after ${formatDuration(limitMs)}\n`) };
      yield { stream: 'exit', exit_code: TIMEOUT_EXIT_CODE, duration_ms, timed_out: true };
      return;
    }
    if (ac.signal.aborted) throw new SbxError('unavailable', 'exec cancelled');
    yield { stream: 'exit', exit_code: exitCode, duration_ms, timed_out: false };
  } finally {
    stopTimer?.();
    signal.removeEventListener('abort', onAbort);
    if (!finished && !ac.signal.aborted) ac.abort(new Error('consumer stopped'));
  }
}
