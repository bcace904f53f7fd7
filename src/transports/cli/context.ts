/**
 * What a command's `run` gets: the client, the output sink, resolved client settings, stdin, env,
 * cwd and a cancel signal. Built once per invocation; the profile file and the client are loaded
 * only when a command asks for them.
 */
import type { Readable } from 'node:stream';
import { Client } from '../../client/client.js';
import type { Transport } from '../../client/transport.js';
import { type ClientConfig, type Env, type GlobalFlags, resolveClientConfig } from './client-config.js';
import type { Output } from './output/output.js';
import type { StreamOutput } from './output/stream-output.js';

export type { ClientConfig, Env, GlobalFlags };

export interface StdinSource {
  stream: Readable & { isTTY?: boolean };
  isTTY: boolean;
}

/**
 * The context of one run. `O` is the output: the full CLI's `Output`; the `sbx exec` fast path runs
 * the exec command's streamed path with the chalk-free `StreamOutput` it extends (fast-exec.ts).
 */
export interface CliContext<O extends StreamOutput = Output> {
  readonly out: O;
  /** The typed client (created on first use). */
  readonly client: Client;
  readonly config: ClientConfig;
  readonly env: Env;
  readonly cwd: string;
  readonly home: string;
  readonly stdin: StdinSource;
  /** Aborted on cancellation: SIGINT/SIGTERM of the process (see signals.ts), or the caller of main(). */
  readonly signal: AbortSignal;
}

export interface ContextInit<O extends StreamOutput = Output> {
  out: O;
  flags: GlobalFlags;
  env: Env;
  cwd: string;
  home: string;
  stdin: StdinSource;
  signal: AbortSignal;
  /** False for commands that never call the server (serve, completion…): the profile is not read. */
  useProfile: boolean;
  /** How the client's requests travel; the client's default (NodeTransport) when absent. */
  transport?: Transport;
}

/** Builds the context; `close()` releases the client's connections. */
export async function createContext<O extends StreamOutput>(init: ContextInit<O>): Promise<CliContext<O> & { close(): Promise<void> }> {
  let client: Client | undefined;
  // Resolved before the command starts (one stat when there is no profile) so a bad profile
  // fails early, with exit code 3.
  const cfg = await resolveClientConfig(init.flags, init.env, init.home, init.useProfile);
  return {
    out: init.out,
    env: init.env,
    cwd: init.cwd,
    home: init.home,
    stdin: init.stdin,
    signal: init.signal,
    config: cfg,
    get client(): Client {
      client ??= new Client({ url: cfg.url, apiKey: cfg.apiKey, adminKey: cfg.adminKey, userId: cfg.user, transport: init.transport });
      return client;
    },
    async close() {
      await client?.close();
    },
  };
}
