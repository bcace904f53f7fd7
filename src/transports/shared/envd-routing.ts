/**
 * How E2B's sandbox proxy routes to envd (DESIGN.md §14), shared by the envd plane (transports/e2b)
 * and the preview router that hands it `49983-<id>.<domain>` hosts (transports/http).
 */
/** E2B's port of envd inside a sandbox; any other `E2b-Sandbox-Port` is the sandbox's own (§9 preview). */
export const ENVD_PORT = 49983;
/** Where `E2B_SANDBOX_URL` points: `http://HOST:PORT/e2b/sandbox`. */
export const ENVD_PREFIX = '/e2b/sandbox';
export const SANDBOX_ID_HEADER = 'e2b-sandbox-id';
export const SANDBOX_PORT_HEADER = 'e2b-sandbox-port';
