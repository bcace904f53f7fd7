import { Writable } from 'node:stream';
import type { CommandSpec } from '../spec.js';

const CONFIG_EXAMPLE = `{
  "mcpServers": {
    "sbx": {
      "command": "npx",
      "args": ["-y", "sbx-cli", "mcp"],
      "env": { "SBX_URL": "http://127.0.0.1:7423", "SBX_API_KEY": "your-api-key" }
    }
  }
}`;

/**
 * `sbx mcp`: a Model Context Protocol server over stdio (DESIGN.md §2, transports/mcp), so an AI
 * agent uses sandboxes directly. The SDK is loaded here, inside the handler, never on the CLI's
 * start path.
 */
export const mcpCommand: CommandSpec = {
  name: 'mcp',
  summary: 'run a Model Context Protocol server over stdio so AI agents can use sandboxes',
  description:
    'Speaks MCP (JSON-RPC over stdin/stdout) to an AI agent and drives the sbx server named by\n' +
    '--url / SBX_URL with --api-key / SBX_API_KEY (and --user / SBX_USER_ID), like every client command.\n' +
    'Tools: spawn, list_sandboxes, exec, read_file, write_file, list_files, destroy, logs, templates,\n' +
    'preview_url, start_process, process_output, stop_process, fork, pause, resume, secrets_list. Resources: sbx://sandboxes and each\n' +
    'sandbox file as sbx://sandboxes/{sandbox_id}/files{+path}. exec keeps the first 16 KiB and the\n' +
    'last 48 KiB of each stream and says how much it dropped. API errors come back as tool errors\n' +
    '{code, message}; the server keeps serving. stdout carries only protocol frames; it runs until\n' +
    'the agent closes stdin.\n\n' +
    'Add it to an agent (Claude Desktop claude_desktop_config.json, or any MCP client config):\n\n' +
    CONFIG_EXAMPLE.replace(/^/gm, '  '),
  examples: ['sbx mcp', 'SBX_URL=http://10.0.0.5:7423 SBX_API_KEY=... sbx mcp', 'npx -y @modelcontextprotocol/inspector sbx mcp'],
  stopsOnSignal: true,
  async run(ctx) {
    const [{ serveStdio }, { VERSION }] = await Promise.all([import('../../../compose/mcp.js'), import('../../../version.js')]);
    const stdout = new Writable({
      write(chunk: Buffer, _enc, cb) {
        ctx.out.raw('stdout', chunk).then(() => cb(), cb);
      },
    });
    await serveStdio({
      client: ctx.client,
      version: VERSION,
      secrets: [ctx.config.apiKey, ctx.config.adminKey],
      stdin: ctx.stdin.stream,
      stdout,
      signal: ctx.signal,
    });
    return 0;
  },
};
