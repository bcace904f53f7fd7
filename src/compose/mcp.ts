/**
 * `sbx mcp` starts a process that serves MCP over stdio (DESIGN.md §2: sibling transports never
 * import each other, so the CLI command takes the MCP transport from the composition root).
 */
export { serveStdio } from '../transports/mcp/stdio.js';
