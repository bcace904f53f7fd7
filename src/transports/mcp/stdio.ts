/** `sbx mcp` over stdio: the server of server.ts on the process's streams. */
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createSbxMcpServer, type SbxMcpOptions } from './server.js';

export interface StdioOptions extends SbxMcpOptions {
  stdin: Readable;
  stdout: Writable;
  /** Aborting it closes the server. */
  signal: AbortSignal;
}

/**
 * Serves MCP over the given stdio streams until stdin ends (the agent went away) or `signal` aborts.
 */
export async function serveStdio(opts: StdioOptions): Promise<void> {
  const server = createSbxMcpServer(opts);
  const transport = new StdioServerTransport(opts.stdin, opts.stdout);
  const done = new Promise<void>((resolve) => {
    const finish = () => resolve();
    opts.stdin.once('end', finish);
    opts.stdin.once('close', finish);
    opts.signal.addEventListener('abort', finish, { once: true });
    transport.onclose = finish;
  });
  await server.connect(transport);
  if (opts.signal.aborted) return void (await server.close().catch(() => {}));
  await done;
  await server.close().catch(() => {});
}
