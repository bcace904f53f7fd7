/**
 * The dashboard's API access: the project's typed client (src/client/browser.ts) over fetch. The
 * key the user enters lives in sessionStorage and travels only in the `X-API-Key` header (the
 * terminal's WebSocket, which cannot carry headers from a browser, sends it as a
 * `Sec-WebSocket-Protocol` entry) — never in a URL.
 */
import { Client, FetchTransport, SbxError, type Sandbox } from '../../../client/browser.js';

const KEY_SLOT = 'sbx.api_key';

export const key = (): string => sessionStorage.getItem(KEY_SLOT) ?? '';
export const setKey = (value: string): void => sessionStorage.setItem(KEY_SLOT, value);
export const forgetKey = (): void => sessionStorage.removeItem(KEY_SLOT);

let unauthorized: (message: string) => void = () => undefined;
/** What to do when the server answers 401 (ask for the key again), with the server's message. */
export function onUnauthorized(fn: (message: string) => void): void {
  unauthorized = fn;
}

/** fetch that notices a 401 on its way to the client (which then throws SbxError `unauthorized`). */
const watchedFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  if (res.status === 401) {
    const body = (await res
      .clone()
      .json()
      .catch(() => ({}))) as { message?: unknown };
    unauthorized(typeof body.message === 'string' ? body.message : 'unauthorized');
  }
  return res;
};
const transport = new FetchTransport({ fetch: watchedFetch, init: { cache: 'no-store', credentials: 'omit' } });

let client: { key: string; client: Client } | undefined;
/** The typed client with the current key (a new one when the key changed). */
export function api(): Client {
  const k = key();
  if (client?.key !== k) client = { key: k, client: new Client({ url: location.origin, apiKey: k || undefined, transport }) };
  return client.client;
}

export const isUnauthorized = (e: unknown): boolean => e instanceof SbxError && e.code === 'unauthorized';
export const errText = (e: unknown): string =>
  e instanceof SbxError ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e);

/** A sandbox as the views show it: `worker_id` is read when a server reports placement. */
export type ShownSandbox = Sandbox & { worker_id?: string };
