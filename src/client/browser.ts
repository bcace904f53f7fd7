/**
 * The typed client for browsers: `Client` with the fetch transport by default. Its module graph
 * holds no Node module and no undici, eventsource or ws import at top level (the Node-only paths
 * load theirs with `import()` and are never taken here); the dashboard at /ui is built on it.
 *
 *   import { Client } from 'sbx-cli/browser';
 *   const sbx = new Client({ url: location.origin, apiKey });
 */
import { Client as BaseClient } from './client.js';
import { FetchTransport } from './fetch-transport.js';
import type { ClientOptions } from './http.js';

export class Client extends BaseClient {
  constructor(opts: ClientOptions = {}) {
    super({ ...opts, transport: opts.transport ?? new FetchTransport() });
  }
}

export { FetchTransport } from './fetch-transport.js';
export type { FetchTransportOptions } from './fetch-transport.js';
export type { Transport, TransportRequest, TransportResponse, ResponseBody } from './transport.js';
export type { ClientOptions, EventStreamOptions, ExecSession, ExecWsInput, ExecWsOptions } from './client.js';
export { DEFAULT_URL } from './http.js';
export type { WorkerCredentials } from './http.js';
export { SbxError } from '../contracts/errors.js';
export type { ErrorCode } from '../contracts/errors.js';
export type * from './types.js';
export type { ProcessInfo, ProcessOutputChunk, ProcessStart } from './processes.js';
