/**
 * The API request a piece of work runs for, carried across awaits (AsyncLocalStorage), so calls it
 * makes to workers carry the same `X-Request-ID` (spec 5.2) without threading it through core.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const store = new AsyncLocalStorage<{ requestId: string }>();

/** Marks the rest of the current async context as serving `requestId` (a fastify onRequest hook). */
export function enterRequestId(requestId: string): void {
  store.enterWith({ requestId });
}

/** Runs `fn` as serving `requestId`. */
export function runWithRequestId<T>(requestId: string, fn: () => T): T {
  return store.run({ requestId }, fn);
}

/** The request id of the API request being served, if any. */
export function currentRequestId(): string | undefined {
  return store.getStore()?.requestId;
}
