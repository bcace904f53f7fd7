/**
 * `sbx mcp`: a Model Context Protocol server over stdio on the typed client (DESIGN.md §2), so an
 * AI agent can spawn sandboxes, run commands and move files through the sbx server named by the
 * usual `--url` / `--api-key`.
 *
 * Rules: stdout carries nothing but protocol frames; every failure of the API or of the arguments
 * is a tool result with `isError: true` whose text is `{code, message}` (never a crash: the server
 * keeps serving); the keys the client holds never appear in any result.
 *
 * Loaded only by the `mcp` command (with import()), so the SDK and zod stay off the CLI start path.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '../../client/client.js';
import { OUTPUT_LIMIT } from './capture.js';
import { registerResources } from './resources.js';
import { TOOLS } from './tools.js';
import { errorBody, FILE_URI_TEMPLATE, type Json, ToolError } from './values.js';

export { FILE_URI_TEMPLATE, READ_LIMIT } from './values.js';

export interface SbxMcpOptions {
  client: Client;
  /** Server version shown to MCP clients. */
  version: string;
  /** Values that must never appear in a result (the API and admin keys). */
  secrets?: readonly (string | undefined)[];
}

/** Builds the MCP server (not yet connected). */
export function createSbxMcpServer(opts: SbxMcpOptions): McpServer {
  const { client } = opts;
  const secrets = (opts.secrets ?? []).filter((s): s is string => typeof s === 'string' && s.length >= 4);
  const scrub = (text: string): string => secrets.reduce((t, s) => t.split(s).join('***'), text);

  const server = new McpServer(
    { name: 'sbx', title: 'sbx sandboxes', version: opts.version },
    {
      instructions:
        'Tools of an sbx control plane: disposable execution sandboxes. Typical flow: spawn → exec / write_file / read_file → destroy. ' +
        'exec runs a shell command line (sh -c) unless args is given; a non-zero exit code is a normal result. ' +
        `Output over ${OUTPUT_LIMIT / 1024} KiB per stream is cut in the middle, with a note. Sandboxes expire after their ttl. ` +
        `Files are also resources: ${FILE_URI_TEMPLATE}.`,
    },
  );

  /**
   * A result: the value as JSON text; with `text`, that text instead and the value as
   * structuredContent too (exec: readable output for the agent, fields for programs).
   */
  const ok = (value: Json, text?: string): CallToolResult => {
    if (text === undefined) return { content: [{ type: 'text', text: scrub(JSON.stringify(value, null, 2)) }] };
    return { content: [{ type: 'text', text: scrub(text) }], structuredContent: JSON.parse(scrub(JSON.stringify(value))) as Json };
  };
  const fail = (err: unknown): CallToolResult => ({
    content: [{ type: 'text', text: scrub(JSON.stringify(errorBody(err))) }],
    isError: true,
  });

  // Arguments that fail a tool's schema (and unknown tools) are turned into tool errors by the SDK
  // itself, as "MCP error -32602: Input validation error: …"; give them the same {code, message}
  // shape as every other tool error. (An SDK without this hook keeps its own text: still a tool error.)
  const sdk = server as unknown as { createToolError?: (message: string) => CallToolResult };
  if (typeof sdk.createToolError === 'function') {
    sdk.createToolError = (message: string) => fail(new ToolError('bad_request', String(message).replace(/^MCP error -?\d+: /, '')));
  }

  for (const t of TOOLS) {
    server.registerTool(
      t.name,
      {
        title: t.meta.title,
        description: t.meta.description,
        inputSchema: t.shape,
        annotations: {
          title: t.meta.title,
          readOnlyHint: t.meta.readOnly ?? false,
          destructiveHint: t.meta.destructive ?? false,
          openWorldHint: false,
        },
      },
      (async (args: Record<string, unknown>, extra: { signal: AbortSignal }) => {
        try {
          return await t.run(args, extra.signal, { client, ok });
        } catch (err) {
          return fail(err);
        }
      }) as never,
    );
  }

  registerResources(server, client, scrub);

  return server;
}
