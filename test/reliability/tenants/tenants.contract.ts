/**
 * The tenant attack suite (issue 30, DESIGN.md §3 ownership, §8 pool): a second owner (or pool
 * tenant) tries every sandbox-scoped route, the event stream and the MCP tools against the first
 * one's sandbox, snapshot and volume, over real HTTP on a real server. Every attempt must answer
 * 404 (`not_found`, naming nobody) and change or read nothing; afterwards the owner checks that its
 * files, processes, snapshot, volume and sandbox are as they were. The counts are printed in one
 * line (`tenant attacks on <setup>: N attempts, 0 succeeded`) for RELIABILITY.md.
 */
import { randomBytes } from 'node:crypto';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect, it } from 'vitest';
import { call } from '../../helpers/http.js';
import { openSse } from '../../helpers/sse.js';
import { openWs, UpgradeRefused } from '../../helpers/ws.js';
import { record } from '../harness.js';

export interface TenantSetup {
  url: string;
  /** Headers that make a request the victim's, and the attacker's. */
  victim: Record<string, string>;
  attacker: Record<string, string>;
  /** Whether the provider keeps snapshots and volumes (so those are attacked too). */
  snapshots: boolean;
  volumes: boolean;
  /** A name unique to this run, for snapshots and volumes. */
  tag: string;
  /** Headers of a credential that may read anything (to check nothing changed), when there is one. */
  admin?: Record<string, string>;
  /** The worker RPC endpoint that runs the sandboxes, when an `sbx worker` does. */
  rpcUrl?: string;
}

/** Worker RPC methods a tenant's credentials try (DESIGN.md §7): user keys are never worker identity. */
const RPC_METHODS = [
  'worker.status',
  'worker.exec',
  'worker.exec_stream',
  'worker.file_read',
  'worker.file_write',
  'worker.logs',
  'worker.destroy',
];

const SECRET = 'the victim wrote this';

const KEY = 'tenant-attack-key-0123456789abcdef';
const ADMIN = 'tenant-attack-admin-0123456789abcdef';
const as = (user: string) => ({ 'x-api-key': KEY, 'x-user-id': user });
const tag = () => randomBytes(3).toString('hex');

/** The `auth` config of a server whose owners are kept apart (auth.enforce_ownership). */
export const OWNERS_AUTH = { api_key: KEY, admin_api_key: ADMIN, enforce_ownership: true };

/** Two owners of a server started with OWNERS_AUTH (snapshots and volumes attacked too). */
export function ownersAt(url: string, extra: Partial<TenantSetup> = {}): TenantSetup {
  const admin = { 'x-api-key': KEY, 'x-admin-api-key': ADMIN };
  return { url, victim: as('victim'), attacker: as('attacker'), admin, snapshots: true, volumes: true, tag: tag(), ...extra };
}

/** Two pool tenants: pool sandboxes answer 501 to snapshots and volumes (DESIGN.md §8), so those are left out. */
export function poolTenantsAt(url: string): TenantSetup {
  return { url, victim: { 'x-user-id': 'victim' }, attacker: { 'x-user-id': 'attacker' }, snapshots: false, volumes: false, tag: tag() };
}

interface Attempt {
  what: string;
  /** Resolves to a description of what went wrong, or undefined when the attempt was refused as it must be. */
  run(): Promise<string | undefined>;
}

function expect404(res: { status: number; body: unknown; text: string }, attackerId: string): string | undefined {
  if (res.status !== 404) return `status ${res.status}: ${res.text.slice(0, 200)}`;
  const body = res.body as { code?: string; message?: string };
  if (body.code !== 'not_found') return `code ${body.code}`;
  if (attackerId && (body.message ?? '').includes(attackerId)) return 'the message names the caller';
  return undefined;
}

async function mcpTool(url: string, headers: Record<string, string>, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const client = new McpClient({ name: 'sbx-tenant-attack', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  try {
    return (await client.callTool({ name, arguments: args })) as CallToolResult;
  } finally {
    await client.close();
  }
}

/** Registers the suite's one test; `setup` is called when it runs (after the suite's beforeAll). */
export function tenantAttacks(title: string, setup: () => TenantSetup): void {
  it(`${title}: another tenant reaches nothing of a sandbox, its files, processes, snapshot or volume`, async () => {
    const s = setup();
    const V = s.victim;
    const A = s.attacker;
    const attackerId = A['x-user-id'] ?? '';
    const get = (path: string, h = V) => call(s.url, 'GET', path, undefined, h);

    // ---- the victim's things
    const spawned = await call(s.url, 'POST', '/api/v1/sandboxes', {}, V);
    expect(spawned.status, spawned.text).toBe(201);
    const id = spawned.body.id as string;
    const sb = `/api/v1/sandboxes/${id}`;
    const wrote = await call(s.url, 'POST', `${sb}/files`, { path: '/tmp/secret.txt', content: SECRET }, V);
    expect(wrote.status, wrote.text).toBe(200);
    const proc = await call(s.url, 'POST', `${sb}/processes`, { command: 'sleep 300' }, V);
    expect(proc.status, proc.text).toBe(201);
    const pid = proc.body.id as string;
    const snapName = `victim-${s.tag}`;
    if (s.snapshots) {
      const snap = await call(s.url, 'POST', `${sb}/snapshot`, { name: snapName }, V);
      expect(snap.status, snap.text).toBe(201);
    }
    const volName = `victim-vol-${s.tag}`;
    if (s.volumes) {
      const vol = await call(s.url, 'POST', '/api/v1/volumes', { name: volName }, V);
      expect(vol.status, vol.text).toBe(201);
    }
    // The attacker's own sandbox: a real tenant of the same server.
    const own = await call(s.url, 'POST', '/api/v1/sandboxes', {}, A);
    expect(own.status, own.text).toBe(201);
    const events = await openSse(`${s.url}/api/v1/events?sandbox_id=${id}`, A);

    // ---- the attempts
    const refused = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Attempt => ({
      what: `${method} ${path}`,
      run: async () => expect404(await call(s.url, method, path, body, { ...A, ...headers }), attackerId),
    });
    const attempts: Attempt[] = [
      refused('GET', sb),
      refused('POST', `${sb}/extend`, { ttl: '1h' }),
      refused('DELETE', sb),
      refused('POST', `${sb}/exec`, { command: 'echo pwned > /tmp/pwned.txt' }),
      refused('POST', `${sb}/exec`, { command: 'echo pwned > /tmp/pwned.txt', stream: true }),
      refused('POST', `${sb}/exec`, { command: 'cat /tmp/secret.txt', stream: true }, { accept: 'application/octet-stream' }),
      refused('POST', `${sb}/processes`, { command: 'sleep 300' }),
      refused('GET', `${sb}/processes`),
      refused('GET', `${sb}/processes/${pid}`),
      refused('GET', `${sb}/processes/${pid}/output`),
      refused('POST', `${sb}/processes/${pid}/signal`, { signal: 'KILL' }),
      refused('DELETE', `${sb}/processes/${pid}`),
      refused('POST', `${sb}/files`, { path: '/tmp/pwned.txt', content: 'x' }),
      refused('POST', `${sb}/files?path=/tmp/pwned.txt`, 'x', { 'content-type': 'application/octet-stream' }),
      refused('GET', `${sb}/files?path=/tmp/secret.txt`),
      refused('DELETE', `${sb}/files?path=/tmp/secret.txt`),
      refused('GET', `${sb}/files/list?path=/tmp`),
      refused('POST', `${sb}/files/move`, { old_path: '/tmp/secret.txt', new_path: '/tmp/moved.txt' }),
      refused('POST', `${sb}/files/chmod`, { path: '/tmp/secret.txt', mode: '777' }),
      refused('GET', `${sb}/files/stat?path=/tmp/secret.txt`),
      refused('GET', `${sb}/files/glob?pattern=/tmp/*`),
      refused('GET', `${sb}/logs`),
      refused('POST', `${sb}/snapshot`, { name: `stolen-${s.tag}` }),
      refused('PUT', `${sb}/egress`, { allow: ['example.com'] }),
      {
        what: 'GET /api/v1/sandboxes (list and id_prefix)',
        run: async () => {
          const all = await call(s.url, 'GET', '/api/v1/sandboxes', undefined, A);
          if ((all.body as Array<{ id: string }>).some((x) => x.id === id)) return 'listed';
          const pre = await call(s.url, 'GET', `/api/v1/sandboxes?id_prefix=${id.slice(0, 6)}&limit=10`, undefined, A);
          return (pre.body as Array<{ id: string }>).some((x) => x.id === id) ? 'found by prefix' : undefined;
        },
      },
      {
        what: 'GET /exec/ws (WebSocket exec)',
        run: async () => {
          try {
            const ws = await openWs(s.url, `${sb}/exec/ws`, A);
            ws.send({ type: 'start', command: 'cat /tmp/secret.txt' });
            const msgs = await ws.rest(10_000).catch(() => ws.seen);
            ws.ws.close();
            const text = JSON.stringify(msgs);
            if (text.includes(SECRET)) return 'read the secret';
            const err = msgs.find((x) => x.type === 'error') as { code?: string } | undefined;
            return err?.code === 'not_found' ? undefined : `answered ${text.slice(0, 200)}`;
          } catch (e) {
            return e instanceof UpgradeRefused && e.status === 404 ? undefined : `upgrade: ${String(e)}`;
          }
        },
      },
      ...['exec', 'read_file', 'write_file', 'list_files', 'logs', 'destroy'].map(
        (tool): Attempt => ({
          what: `MCP tool ${tool}`,
          run: async () => {
            const args: Record<string, unknown> = { sandbox_id: id };
            if (tool === 'exec') args.command = 'cat /tmp/secret.txt';
            if (tool === 'read_file' || tool === 'write_file') args.path = '/tmp/secret.txt';
            if (tool === 'write_file') args.content = 'pwned';
            if (tool === 'list_files') args.path = '/tmp';
            const r = await mcpTool(s.url, A, tool, args);
            const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
            if (text.includes(SECRET)) return 'read the secret';
            return r.isError && text.includes('not_found') ? undefined : `answered ${text.slice(0, 200)}`;
          },
        }),
      ),
    ];
    if (s.rpcUrl) {
      const rpcUrl = s.rpcUrl.endsWith('/rpc') ? s.rpcUrl : `${s.rpcUrl}/rpc`;
      for (const method of RPC_METHODS) {
        attempts.push({
          what: `worker RPC ${method} with the tenant's key`,
          run: async () => {
            const r = await fetch(rpcUrl, {
              method: 'POST',
              headers: { 'content-type': 'application/json', ...A, 'x-worker-id': 'tw' },
              body: JSON.stringify({
                id: 'r1',
                method,
                worker_id: 'tw',
                params: { sandbox_id: id, path: '/tmp/secret.txt', command: 'true' },
              }),
            });
            const text = await r.text();
            if (text.includes(SECRET) || text.includes(Buffer.from(SECRET).toString('base64'))) return 'read the secret';
            return r.status === 401 ? undefined : `status ${r.status}: ${text.slice(0, 200)}`;
          },
        });
      }
    }
    if (s.snapshots) {
      attempts.push(
        refused('GET', `/api/v1/snapshots/${snapName}`),
        refused('DELETE', `/api/v1/snapshots/${snapName}`),
        refused('POST', '/api/v1/sandboxes', { snapshot: snapName }),
        {
          what: 'GET /api/v1/snapshots (list)',
          run: async () => {
            const l = await call(s.url, 'GET', '/api/v1/snapshots', undefined, A);
            return (l.body as Array<{ name: string }>).some((x) => x.name === snapName) ? 'listed' : undefined;
          },
        },
      );
    }
    if (s.volumes) {
      attempts.push(refused('DELETE', `/api/v1/volumes/${volName}`), {
        what: 'GET /api/v1/volumes (list)',
        run: async () => {
          const l = await call(s.url, 'GET', '/api/v1/volumes', undefined, A);
          return (l.body as Array<{ name: string }>).some((x) => x.name === volName) ? 'listed' : undefined;
        },
      });
      attempts.push({
        what: 'POST /api/v1/sandboxes with the victim volume',
        run: async () => {
          const r = await call(s.url, 'POST', '/api/v1/sandboxes', { volumes: [{ name: volName, mount_path: '/mnt/v' }] }, A);
          if (r.status === 201) return 'spawned with the victim volume';
          return r.status === 404 || (r.status === 400 && !(r.text ?? '').includes(attackerId)) ? undefined : `status ${r.status}`;
        },
      });
    }

    const failures: string[] = [];
    for (const a of attempts) {
      const wrong = await a.run();
      if (wrong) failures.push(`${a.what}: ${wrong}`);
    }

    // ---- the victim checks that nothing changed
    const after = await get(sb);
    expect(after.status).toBe(200);
    expect(after.body.state).toBe('running');
    expect(after.body.expires_at).toBe(spawned.body.expires_at);
    expect((await get(`${sb}/files?path=/tmp/secret.txt`)).text).toBe(SECRET);
    expect((await get(`${sb}/files/stat?path=/tmp/pwned.txt`)).status).toBe(404);
    expect((await get(`${sb}/files/stat?path=/tmp/moved.txt`)).status).toBe(404);
    const procs = (await get(`${sb}/processes`)).body as Array<{ id: string; state: string }>;
    expect(procs.map((p) => [p.id, p.state])).toEqual([[pid, 'running']]);
    if (s.snapshots) {
      expect((await get(`/api/v1/snapshots/${snapName}`)).status).toBe(200);
      expect((await get(`/api/v1/snapshots/stolen-${s.tag}`, s.admin ?? V)).status).toBe(404);
    }
    if (s.volumes) expect((await get('/api/v1/volumes')).body.map((v: { name: string }) => v.name)).toContain(volName);
    // The victim's activity reaches its own stream, never the attacker's.
    expect((await call(s.url, 'POST', `${sb}/exec`, { command: 'true' }, V)).status).toBe(200);
    const leaked = events.events().filter((e) => e.sandbox_id === id || JSON.stringify(e).includes(id));
    events.close();
    if (leaked.length > 0) failures.push(`events: ${leaked.length} about the victim's sandbox reached the attacker`);

    process.stdout.write(`tenant attacks on ${title}: ${attempts.length + 1} attempts, ${failures.length} succeeded\n`);
    record('tenants', title, {
      attempts: attempts.length + 1,
      succeeded: failures.length,
      examples: failures.slice(0, 3).join('; ') || 'none',
    });
    expect(failures).toEqual([]);

    // ---- clean up what this test made
    await call(s.url, 'DELETE', `${sb}/processes/${pid}`, undefined, V);
    await call(s.url, 'DELETE', sb, undefined, V);
    await call(s.url, 'DELETE', `/api/v1/sandboxes/${own.body.id}`, undefined, A);
    if (s.snapshots) await call(s.url, 'DELETE', `/api/v1/snapshots/${snapName}`, undefined, V);
    if (s.volumes) await call(s.url, 'DELETE', `/api/v1/volumes/${volName}`, undefined, V);
  }, 120_000);
}
