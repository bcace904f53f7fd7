/** Time of day and ids: core reads them only through these ports. */

/**
 * The time of day. Core reads it only through this port (scripts/check-deps.mjs rejects
 * `Date.now()` and `new Date()` in core). Durations (exec duration, health latency, retry budgets)
 * are measured with `performance.now()`: a monotonic stopwatch, not a time of day, so a fake clock
 * in tests does not freeze them and a wall-clock step does not bend them.
 */
export interface Clock {
  now(): Date;
}

export interface IdSource {
  /** `sb-` + short random suffix. */
  sandboxId(): string;
  /** Random opaque id (request ids, event ids, installation id). */
  randomId(bytes?: number): string;
}
