/** One spawn waiting for capacity. Settled exactly once: admitted, timed out, cancelled or shut down. */
export interface Waiter<Req, T> {
  readonly req: Req;
  /** Clock time (ms) it entered the queue. */
  readonly enqueuedAt: number;
  readonly settled: boolean;
  /** Admission granted: leaves the queue and resolves the waiting spawn. */
  admit(value: T): void;
  /** Leaves the queue and fails the waiting spawn. */
  fail(err: Error): void;
}

export interface EnqueueHooks<Req, T> {
  /** The wait exceeded the queue timeout; the waiter is already out of the queue. Returns the error to fail with. */
  onTimeout(w: Waiter<Req, T>): Error;
  /** The caller's signal fired; the waiter is already out of the queue. */
  onCancel(w: Waiter<Req, T>): Error;
}

/**
 * FIFO of spawns denied for capacity (spec 3.4 rule 4). It owns the per-waiter timers and abort
 * listeners so that whoever settles a waiter first (admission, timeout, cancel) wins and the
 * others become no-ops.
 */
export class SpawnQueue<Req, T> {
  private items: Array<Waiter<Req, T>> = [];

  constructor(
    private readonly timeoutMs: () => number,
    private readonly now: () => number,
  ) {}

  get depth(): number {
    return this.items.length;
  }

  /** Waiters in arrival order (a copy: settling during iteration is safe). */
  list(): Array<Waiter<Req, T>> {
    return [...this.items];
  }

  /** Appends a waiter; the promise settles when it is admitted or fails. */
  enqueue(req: Req, signal: AbortSignal | undefined, hooks: EnqueueHooks<Req, T>): { waiter: Waiter<Req, T>; done: Promise<T> } {
    let resolveFn!: (v: T) => void;
    let rejectFn!: (e: Error) => void;
    const done = new Promise<T>((res, rej) => {
      resolveFn = res;
      rejectFn = rej;
    });
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      const i = this.items.indexOf(waiter);
      if (i >= 0) this.items.splice(i, 1);
      return true;
    };
    const waiter: Waiter<Req, T> = {
      req,
      enqueuedAt: this.now(),
      get settled() {
        return settled;
      },
      admit: (value) => {
        if (finish()) resolveFn(value);
      },
      fail: (err) => {
        if (finish()) rejectFn(err);
      },
    };
    const onAbort = () => {
      if (finish()) rejectFn(hooks.onCancel(waiter));
    };
    this.items.push(waiter);
    signal?.addEventListener('abort', onAbort, { once: true });
    const ms = this.timeoutMs();
    if (ms > 0) {
      timer = setTimeout(() => {
        if (finish()) rejectFn(hooks.onTimeout(waiter));
      }, ms);
      timer.unref?.();
    }
    return { waiter, done };
  }

  /** Fails every waiter (shutdown). */
  failAll(err: Error): void {
    for (const w of this.list()) w.fail(err);
  }
}
