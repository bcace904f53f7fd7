/**
 * A real control plane (as `serve` builds it) with providers.custom_http enabled beside mock,
 * pointing at the reference server on a real port: `GET /api/v1/providers` lists custom-http with
 * its health and the capabilities its backend announced, and a sandbox on it runs commands and
 * holds files through the public API. A backend that is down is listed unhealthy, not hidden.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { buildProviderServer } from '../../src/transports/provider-server/app.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const KEY = 'sbx-test-custom-http-key-3e8a1f0c7d';
let dir = '';
let backend: FastifyInstance;
let backendUrl = '';
let srv: TestServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-api-'));
  backend = await buildProviderServer({ provider: createMockProvider({ rootDir: join(dir, 'backend') }), apiKey: KEY });
  backendUrl = await backend.listen({ host: '127.0.0.1', port: 0 });
  srv = await startTestServer({ providers: { custom_http: { enabled: true, base_url: backendUrl, api_key: KEY, timeout: '5s' } } });
});
afterAll(async () => {
  await srv?.close();
  await backend?.close();
  rmSync(dir, { recursive: true, force: true });
});

const json = (path: string, body?: unknown) =>
  fetch(
    `${srv.url}${path}`,
    body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
  );

describe('custom-http beside mock on a serve-style control plane', () => {
  it('lists custom-http with health and the backend’s capabilities; the detail hides the key', async () => {
    const list = (await (await json('/api/v1/providers')).json()) as Array<{
      name: string;
      default: boolean;
      healthy: boolean;
      capabilities: string[];
    }>;
    expect(list.map((p) => [p.name, p.default])).toEqual([
      ['custom_http', false],
      ['mock', true],
    ]);
    const ch = list.find((p) => p.name === 'custom_http')!;
    expect(ch.healthy).toBe(true);
    expect(ch.capabilities).toEqual(expect.arrayContaining(['spawn', 'exec', 'exec_stream', 'files', 'health', 'console', 'exec_stdin']));
    const detail = await (await json('/api/v1/providers/custom-http')).text();
    expect(detail).not.toContain(KEY);
    // Either spelling names it; the answer gives the canonical name, its config group's (DESIGN §12).
    expect(((await (await json('/api/v1/providers/custom_http')).json()) as { name: string }).name).toBe('custom_http');
    expect(JSON.parse(detail)).toMatchObject({
      name: 'custom_http',
      healthy: true,
      config: { runtime: 'custom-http', base_url: backendUrl, api_key: 'set' },
    });
  });

  it('both spellings spawn on it and are answered with custom_http; templates and worker heartbeats too', async () => {
    for (const spelling of ['custom_http', 'custom-http']) {
      const res = await json('/api/v1/sandboxes', { provider: spelling });
      expect(res.status, spelling).toBe(201);
      const sb = (await res.json()) as { id: string; provider: string };
      expect(sb.provider, spelling).toBe('custom_http');
      expect(((await (await json(`/api/v1/sandboxes/${sb.id}`)).json()) as { provider: string }).provider).toBe('custom_http');
      expect((await fetch(`${srv.url}/api/v1/sandboxes/${sb.id}`, { method: 'DELETE' })).status).toBeLessThan(300);
    }
    const tpl = await json('/api/v1/templates', { name: 'chttp-tpl', provider: 'custom-http' });
    expect(tpl.status).toBe(201);
    expect(((await tpl.json()) as { provider: string }).provider).toBe('custom_http');
    const fromTpl = await json('/api/v1/templates/chttp-tpl/spawn', {});
    expect(fromTpl.status).toBe(201);
    const t = (await fromTpl.json()) as { id: string; provider: string };
    expect(t.provider).toBe('custom_http');
    await fetch(`${srv.url}/api/v1/sandboxes/${t.id}`, { method: 'DELETE' });
    // An older worker advertising the other spelling is listed under the canonical one.
    const hb = await json('/api/v1/admin/workers/w-old/heartbeat', {
      hostname: 'old',
      status: 'online',
      providers: ['custom-http', 'mock'],
    });
    expect(hb.status).toBe(200);
    expect(((await hb.json()) as { providers: string[] }).providers).toEqual(['custom_http', 'mock']);
  });

  it('a sandbox on custom_http runs commands and keeps files through the API', async () => {
    const res = await json('/api/v1/sandboxes', { provider: 'custom_http' });
    expect(res.status).toBe(201);
    const sb = (await res.json()) as { id: string; provider: string };
    expect(sb.provider).toBe('custom_http');
    const ex = (await (await json(`/api/v1/sandboxes/${sb.id}/exec`, { command: 'echo hello; echo oops >&2; exit 3' })).json()) as {
      exit_code: number;
      stdout: string;
      stderr: string;
    };
    expect(ex).toMatchObject({ exit_code: 3, stdout: 'hello\n', stderr: 'oops\n' });
    const del = await fetch(`${srv.url}/api/v1/sandboxes/${sb.id}`, { method: 'DELETE' });
    expect(del.status).toBeLessThan(300);
  });

  it('a backend that is down is listed unhealthy with a message of sbx’s own', async () => {
    const down = await startTestServer({
      providers: { custom_http: { enabled: true, base_url: 'http://127.0.0.1:1', api_key: KEY, timeout: '1s' } },
    });
    try {
      const list = (await (await fetch(`${down.url}/api/v1/providers`)).json()) as Array<{
        name: string;
        healthy: boolean;
        error?: string;
      }>;
      const ch = list.find((p) => p.name === 'custom_http')!;
      expect(ch.healthy).toBe(false);
      expect(ch.error).toMatch(/cannot reach the backend/);
      expect(JSON.stringify(list)).not.toContain(KEY);
    } finally {
      await down.close();
    }
  });
});
