import type { FetchLike } from './transport.js';

/** The port E2B's in-sandbox daemon (envd) listens on. */
export const ENVD_PORT = 49983;

export interface HostedProviderOptions {
  /** Provider name shown by sbx; default `hosted`. */
  name?: string;
  /** The E2B API key (`providers.hosted.api_key` or `api_key_file`). Sent as `X-API-Key`; never shown. */
  apiKey: string;
  /** REST API base; default `https://api.e2b.dev` (`providers.hosted.base_url`). */
  baseUrl?: string;
  /** Sandbox template every spawn starts from; default `base` (`providers.hosted.template`). */
  template?: string;
  /**
   * Domain sandboxes are reached under, `https://<port>-<sandboxID>.<domain>`; default `e2b.app`
   * (the domain the create answer names wins when it names one).
   */
  envdDomain?: string;
  /** Overrides how envd is reached (tests, proxies): base URL for a sandbox's port, no trailing slash. */
  envdUrl?: (sandboxId: string, port: number) => string;
  /** Bound of each non-streaming request; default 30 s. */
  timeoutMs?: number;
  /** E2B's own lifetime for a sandbox (`timeout` on create), in seconds; default 3600. sbx destroys it sooner when its TTL ends. */
  sandboxTimeoutS?: number;
  /** The user commands and file operations run as inside the sandbox; default `root`. */
  user?: string;
  /** Labels runtimes so `listRuntimes` recognises this installation's own. */
  installationId?: string;
  /** fetch to use (tests, a custom undici dispatcher); default the global fetch. */
  fetch?: FetchLike;
}

export interface ResolvedOptions {
  name: string;
  apiKey: string;
  baseUrl: string;
  template: string;
  envdDomain: string;
  envdUrl?: (sandboxId: string, port: number) => string;
  timeoutMs: number;
  sandboxTimeoutS: number;
  user: string;
  installationId: string | null;
  fetch: FetchLike;
}

export function resolveOptions(o: HostedProviderOptions): ResolvedOptions {
  if (typeof o.apiKey !== 'string' || o.apiKey.trim() === '') throw new Error('hosted provider: an API key is required');
  const baseUrl = (o.baseUrl ?? 'https://api.e2b.dev').replace(/\/+$/, '');
  if (!/^https?:\/\//.test(baseUrl)) throw new Error('hosted provider: base_url must be an http(s) URL');
  return {
    name: o.name ?? 'hosted',
    apiKey: o.apiKey.trim(),
    baseUrl,
    template: o.template ?? 'base',
    envdDomain: o.envdDomain ?? 'e2b.app',
    envdUrl: o.envdUrl,
    timeoutMs: o.timeoutMs ?? 30_000,
    sandboxTimeoutS: o.sandboxTimeoutS ?? 3600,
    user: o.user ?? 'root',
    installationId: o.installationId ?? null,
    fetch: o.fetch ?? ((input, init) => fetch(input, init)),
  };
}

/** Metadata keys sbx puts on its sandboxes. */
export const META_MANAGED = 'sbx_managed';
export const META_SANDBOX = 'sbx_sandbox_id';
export const META_INSTALLATION = 'sbx_installation_id';
export const META_OWNER = 'sbx_owner_id';
