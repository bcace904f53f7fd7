/** Package entry of `sbx-cli`: the typed client library. The CLI lives in ./cli.ts. Browsers: `sbx-cli/browser`. */
export { Client, DEFAULT_URL, FetchTransport, NodeTransport, SbxError, UndiciTransport } from './client/index.js';
export type * from './client/index.js';
