/** The typed client: `import { Client } from 'sbx-cli'`. */
export { Client } from './client.js';
export type { ClientOptions, EventStreamOptions, ExecBytesChunk, ExecSession, ExecWsInput, ExecWsOptions } from './client.js';
export type { ExecWsMessage } from './exec-ws.js';
export { DEFAULT_URL } from './http.js';
export { FetchTransport } from './fetch-transport.js';
export type { FetchTransportOptions } from './fetch-transport.js';
export { NodeTransport } from './node-transport.js';
export { UndiciTransport } from './undici-transport.js';
export type { Transport, TransportRequest, TransportResponse, ResponseBody } from './transport.js';
export type { WorkerCredentials } from './http.js';
export { SbxError } from '../contracts/errors.js';
export type { ErrorCode } from '../contracts/errors.js';
export type * from './types.js';
export type { ProcessInfo, ProcessOutputChunk, ProcessStart } from './processes.js';
