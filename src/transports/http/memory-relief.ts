import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Bytes that must have passed through the in-flight budget before an idle budget asks for relief. */
const RELIEF_AFTER_BYTES = 32 * 1024 * 1024;
/** Quiet time after the budget empties before the collection runs (a new burst postpones it). */
const RELIEF_DELAY_MS = 1_000;

let collect: (() => void) | null | undefined;

/** V8's full collection, made callable once (`--expose-gc` set at run time, no command-line flag). */
function collector(): (() => void) | null {
  if (collect !== undefined) return collect;
  try {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  } catch {
    collect = null;
  }
  return collect;
}

/**
 * Gives memory back after a burst of big request bodies or buffered outputs. V8 collects only under
 * allocation pressure, so an idle server would keep the heap (and RSS) that a burst grew to for
 * good; once the budget has carried more than RELIEF_AFTER_BYTES and is empty again, one full
 * collection runs after a short quiet spell. At most one is pending; a new burst postpones it.
 */
export class MemoryRelief {
  private carried = 0;
  private timer: NodeJS.Timeout | undefined;

  /** Records bytes taken into the budget. */
  took(n: number): void {
    this.carried += n;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** The budget is empty now. */
  idle(): void {
    if (this.carried < RELIEF_AFTER_BYTES || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.carried = 0;
      collector()?.();
    }, RELIEF_DELAY_MS);
    this.timer.unref();
  }
}
