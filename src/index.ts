/** Package entry of `sbx-cli`: the typed client library. The CLI lives in ./cli.ts. */
export { Client, DEFAULT_URL, SbxError } from './client/index.js';
export type * from './client/index.js';
