/**
 * The resources of the sbx MCP server: every sandbox file by URI (text for UTF-8, else a base64
 * blob) and the list of live sandboxes. Failures carry the API's `{code, message}`, scrubbed.
 */
import { type McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '../../client/client.js';
import { checkSize, errorBody, FILE_URI_TEMPLATE, textOrBase64 } from './values.js';

export function registerResources(server: McpServer, client: Client, scrub: (text: string) => string): void {
  server.registerResource(
    'sandbox-file',
    new ResourceTemplate(FILE_URI_TEMPLATE, { list: undefined }),
    {
      title: 'A file in a sandbox',
      description: 'sbx://sandboxes/<sandbox_id>/files/<absolute path>: text for UTF-8 content, else a base64 blob.',
    },
    async (uri, vars, extra): Promise<ReadResourceResult> => {
      try {
        const id = decodeURIComponent(String(vars.sandbox_id));
        const path = decodeURIComponent(String(vars.path));
        const bytes = await client.files.read(id, path, { signal: extra.signal });
        checkSize(bytes, path);
        const body = textOrBase64(bytes);
        return {
          contents: [
            body.encoding === 'utf8'
              ? { uri: uri.href, mimeType: 'text/plain', text: scrub(body.content) }
              : { uri: uri.href, mimeType: 'application/octet-stream', blob: body.content },
          ],
        };
      } catch (err) {
        throw new Error(scrub(JSON.stringify(errorBody(err))));
      }
    },
  );

  server.registerResource(
    'sandboxes',
    'sbx://sandboxes',
    { title: 'Live sandboxes', description: 'The live sandboxes this key can see (JSON, at most 1000).', mimeType: 'application/json' },
    async (uri, extra): Promise<ReadResourceResult> => {
      try {
        const page = await client.listPage({ limit: 1000, signal: extra.signal });
        return { contents: [{ uri: uri.href, mimeType: 'application/json', text: scrub(JSON.stringify(page.items, null, 2)) }] };
      } catch (err) {
        throw new Error(scrub(JSON.stringify(errorBody(err))));
      }
    },
  );
}
