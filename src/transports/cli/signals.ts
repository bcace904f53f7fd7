/**
 * Ctrl-C and `kill` for a CLI run: the first SIGINT or SIGTERM aborts the command's cancel signal,
 * so it stops the way it stops for a test (follow loops end, the live view unmounts and gives the
 * cursor back, a raw-mode terminal is restored); the exit code then says which signal it was
 * (130, 143), as a shell expects. A second signal, for a command that does not stop, ends the
 * process the default way.
 */
import { constants } from 'node:os';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
type Caught = (typeof SIGNALS)[number];

export interface SignalCancel {
  readonly signal: AbortSignal;
  /** The signal that cancelled the run, if one did. */
  caught(): Caught | undefined;
  /** Removes the process listeners. */
  dispose(): void;
}

/** Exit code of a run ended by `sig`: 128 + its number. */
export function signalExitCode(sig: Caught): number {
  return 128 + constants.signals[sig];
}

/** Listens for SIGINT and SIGTERM on `proc` until `dispose()`. */
export function cancelOnSignals(proc: NodeJS.Process = process): SignalCancel {
  const controller = new AbortController();
  let caught: Caught | undefined;
  const handlers = SIGNALS.map((sig) => {
    const handler = () => {
      if (caught === undefined) {
        caught = sig;
        controller.abort(new Error(`interrupted by ${sig}`));
        return;
      }
      // Asked twice: stop listening and let the signal do what it does by default.
      dispose();
      proc.kill(proc.pid, sig);
    };
    proc.on(sig, handler);
    return [sig, handler] as const;
  });
  function dispose(): void {
    for (const [sig, handler] of handlers) proc.removeListener(sig, handler);
  }
  return { signal: controller.signal, caught: () => caught, dispose };
}
