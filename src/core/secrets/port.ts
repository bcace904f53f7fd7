/**
 * Secrets the sandbox never sees (DESIGN.md §15): what the egress gateway needs to know of a
 * sandbox's bound secrets. The secrets service (store, encryption, API) provides a `SecretSource`;
 * the gateway (on `serve`, or on a worker through the worker's fetch from the control plane)
 * consumes it. Values live only in memory here and are never logged.
 */
import type { Rule } from '../network/rules.js';

/** `sbx_secret_` and 32 lower-case hex digits: different for every sandbox and binding. */
export const PLACEHOLDER_PATTERN = /sbx_secret_[0-9a-f]{32}/g;
export const PLACEHOLDER_PREFIX = 'sbx_secret_';

/** One secret bound to one sandbox, as the gateway uses it. */
export interface BoundSecret {
  /** The secret's name (the variable inside the sandbox). */
  name: string;
  /** The value the sandbox sees in its environment instead of the secret. */
  placeholder: string;
  /** The real value: only ever put into request headers bound for `hosts`. */
  value: string;
  /** Egress rules (§10 syntax, parsed) naming the hosts the value may go to. */
  hosts: readonly Rule[];
  /** Plain-HTTP injection allowed (the value then crosses the wire in clear). */
  allowPlainHttp: boolean;
}

export interface SecretSource {
  /**
   * The secrets bound to a sandbox, with their current values (rotation and deletion apply to the
   * next call; implementations cache at most 1 s). Fails closed: throws when it cannot tell.
   */
  forSandbox(sandboxId: string, signal?: AbortSignal): Promise<readonly BoundSecret[]>;
}
