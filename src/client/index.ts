/** The typed client: `import { Client } from 'sbx-cli'`. */
export { Client } from './client.js';
export type { ClientOptions, EventStreamOptions } from './client.js';
export { DEFAULT_URL } from './http.js';
export { SbxError } from '../core/errors.js';
export type { ErrorCode } from '../core/errors.js';
export type * from './types.js';
