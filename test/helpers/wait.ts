/**
 * Waiting on an event in integration tests: poll a condition until it holds, bounded by a deadline
 * (never a fixed sleep standing in for the event).
 */

/** Polls `cond` every `every` ms until it returns a truthy value, which it returns; throws after `ms`, naming `what`. */
export async function waitFor<T>(what: string, cond: () => T | Promise<T>, ms = 10_000, every = 25): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, every));
  }
}
