/**
 * MCP over streamable HTTP at `/mcp` in `sbx serve` (issue 19): the SDK's own client against a real
 * server on a real port (mock provider, auth on). The tools act as the caller: its key, its owner
 * id, its rate limit; no key is a 401 before anything runs.
 */
import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call as http } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KEY = 'mcp-http-api-key-0123456789';
const ADMIN = 'mcp-http-admin-key-0123456789';

async function connect(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'sbx-mcp-http-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
async function tool<T = Record<string, unknown>>(client: Client, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, `${name}: ${text(r)}`).toBeFalsy();
  return JSON.parse(text(r)) as T;
}

describe('MCP over streamable HTTP at /mcp', () => {
  let srv: TestServer;
  let alice: Client;

  beforeAll(async () => {
    srv = await startTestServer({ auth: { api_key: KEY, admin_api_key: ADMIN, enforce_ownership: true } });
    alice = await connect(srv.url, { 'X-API-Key': KEY, 'X-User-ID': 'alice' });
  });
  afterAll(async () => {
    await alice?.close();
    await srv?.close();
  });

  it('lists the same tools as sbx mcp', async () => {
    const { tools } = await alice.listTools();
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['spawn', 'exec', 'read_file', 'write_file', 'list_files', 'destroy', 'logs', 'templates', 'preview_url']),
    );
  });

  it('spawn → exec → binary write and read byte-exact → destroy, owned by the caller', async () => {
    const sb = await tool<{ id: string; owner_id?: string }>(alice, 'spawn', { ttl: '10m' });
    expect(sb.owner_id).toBe('alice');
    const r = (await alice.callTool({ name: 'exec', arguments: { sandbox_id: sb.id, command: 'echo hi; exit 3' } })) as CallToolResult;
    expect(text(r)).toContain('hi');
    expect(r.structuredContent).toMatchObject({ exit_code: 3 });
    const bytes = randomBytes(4096);
    await tool(alice, 'write_file', { sandbox_id: sb.id, path: '/workspace/b.bin', content: bytes.toString('base64'), encoding: 'base64' });
    const back = await tool<{ encoding: string; content: string }>(alice, 'read_file', { sandbox_id: sb.id, path: '/workspace/b.bin' });
    expect(back.encoding).toBe('base64');
    expect(Buffer.from(back.content, 'base64').equals(bytes)).toBe(true);
    // Another owner does not see it (the tools act as their caller).
    const bob = await connect(srv.url, { 'X-API-Key': KEY, 'X-User-ID': 'bob' });
    const denied = (await bob.callTool({ name: 'exec', arguments: { sandbox_id: sb.id, command: 'true' } })) as CallToolResult;
    expect(denied.isError).toBe(true);
    expect(JSON.parse(text(denied))).toMatchObject({ code: 'not_found' });
    await bob.close();
    await tool(alice, 'destroy', { sandbox_id: sb.id });
    const after = await http(srv.url, 'GET', `/api/v1/sandboxes/${sb.id}`, undefined, { 'x-api-key': KEY, 'x-admin-api-key': ADMIN });
    expect([after.status, after.body.state ?? after.body.code]).toEqual([404, 'not_found']);
  });

  it('bad arguments are tool errors, and the key never appears in a result', async () => {
    const r = (await alice.callTool({ name: 'exec', arguments: { sandbox_id: 'sb-nope', command: `echo ${KEY}` } })) as CallToolResult;
    expect(r.isError).toBe(true);
    expect(text(r)).not.toContain(KEY);
    const bad = (await alice.callTool({ name: 'read_file', arguments: { sandbox_id: 42 } })) as CallToolResult;
    expect(bad.isError).toBe(true);
  });

  it('no key or a wrong key: 401 {code, message}; GET is 405', async () => {
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const none = await fetch(`${srv.url}/mcp`, { method: 'POST', headers, body: init });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ code: 'unauthorized' });
    const wrong = await fetch(`${srv.url}/mcp`, { method: 'POST', headers: { ...headers, 'x-api-key': 'nope' }, body: init });
    expect(wrong.status).toBe(401);
    const get = await fetch(`${srv.url}/mcp`, { headers: { 'x-api-key': KEY } });
    expect(get.status).toBe(405);
    await expect(connect(srv.url, {})).rejects.toThrow();
  });

  it("with auth off the tools own what the caller's own API calls would (its address)", async () => {
    // Reached at a non-loopback address of this machine, so the caller's address is not 127.0.0.1.
    const addr = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    expect(addr).toBeDefined();
    const open = await startTestServer({ server: { host: '0.0.0.0' } });
    try {
      const url = open.url.replace('127.0.0.1', addr!);
      const agent = await connect(url, {});
      const sb = await tool<{ id: string; owner_id?: string }>(agent, 'spawn', { ttl: '5m' });
      const direct = await http(url, 'POST', '/api/v1/sandboxes', { ttl: '5m' });
      const local = await http(open.url, 'POST', '/api/v1/sandboxes', { ttl: '5m' });
      expect(sb.owner_id).toBe(direct.body.owner_id);
      expect(sb.owner_id).not.toBe(local.body.owner_id);
      await agent.close();
    } finally {
      await open.close();
    }
  });

  it('server.mcp: false → /mcp is 404', async () => {
    const off = await startTestServer({ server: { mcp: false } });
    try {
      expect((await fetch(`${off.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(
        404,
      );
    } finally {
      await off.close();
    }
  });
});
