/**
 * The custom HTTP provider against a backend written for the anchor (DESIGN §12): the reference
 * server in anchor mode (`sbx provider-server --anchor`) on a real port, answering exactly what
 * the anchor's contract documents — a buffered exec is `{exit_code, stdout, stderr}`, a streamed
 * one `{stream, data}` lines and no exit line, `/health` no capabilities. sbx runs a buffered exec
 * as one `POST /exec` without `stream`, and a streamed one ends with exit_code null. Checked on the
 * provider itself and through a real control plane's API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomHttpProvider } from '../../src/adapters/providers/custom-http/index.js';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import type { Provider } from '../../src/core/ports/index.js';
import { buildProviderServer } from '../../src/transports/provider-server/app.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { collect, never, sh } from './provider-contract-helpers.js';

const KEY = 'anchor-backend-key-6d2c0a9b1e7f';
let dir = '';
let backend: FastifyInstance;
let backendUrl = '';
/** What the backend was asked, in order: method, path and whether `stream` was set. */
const seen: Array<{ method: string; url: string; stream: unknown }> = [];
let front: ReturnType<typeof createServer>;
let frontUrl = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-anchor-'));
  backend = await buildProviderServer({ provider: createMockProvider({ rootDir: join(dir, 'backend') }), apiKey: KEY, anchor: true });
  backendUrl = await backend.listen({ host: '127.0.0.1', port: 0 });
  // A recording pass-through in front of it (real HTTP both sides), to see which calls sbx makes.
  front = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    let stream: unknown;
    try {
      stream = (JSON.parse(body.toString('utf8')) as { stream?: unknown }).stream;
    } catch {
      stream = undefined;
    }
    seen.push({ method: req.method!, url: req.url!, stream });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
    const up = await fetch(backendUrl + req.url, { method: req.method, headers, body: body.length > 0 ? body : undefined });
    res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
    for await (const c of up.body ?? []) res.write(c);
    res.end();
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
});
afterAll(async () => {
  front?.closeAllConnections();
  await new Promise((r) => front?.close(r));
  await backend?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the custom HTTP provider against an anchor backend', () => {
  let provider: Provider;
  let runtime = '';
  beforeAll(async () => {
    provider = createCustomHttpProvider({ baseUrl: frontUrl, apiKey: KEY, timeoutMs: 10_000 });
    runtime = (await provider.spawn({ sandbox_id: 'sb-anchor1', image: 'host', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null }))
      .runtime_id;
  });
  afterAll(async () => {
    await provider.destroy(runtime).catch(() => undefined);
    await provider.close?.();
  });

  it('the anchor announces no capabilities beyond the base set (no live stdin)', async () => {
    const h = await provider.health();
    expect(h.healthy).toBe(true);
    expect(provider.capabilities).toEqual(['spawn', 'exec', 'exec_stream', 'files', 'health']);
  });

  it('a buffered exec is one POST /exec without stream, its exit code and output from the JSON answer', async () => {
    seen.length = 0;
    const got = await collect(provider.exec(runtime, sh('echo out; echo err >&2; exit 7', { buffered: true }), never));
    expect(got.stdout).toBe('out\n');
    expect(got.stderr).toBe('err\n');
    expect(got.exitCode).toBe(7);
    expect(seen).toEqual([{ method: 'POST', url: '/exec', stream: undefined }]);
  });

  it('a streamed exec reads the output lines and ends without an exit code', async () => {
    seen.length = 0;
    const got = await collect(provider.exec(runtime, sh('echo a; echo b >&2; exit 3'), never));
    expect(got.stdout).toBe('a\n');
    expect(got.stderr).toBe('b\n');
    expect(got.exitCode).toBeNull();
    expect(got.events.some((e) => e.stream === 'exit')).toBe(false);
    expect(seen).toEqual([{ method: 'POST', url: '/exec', stream: true }]);
  });
});

describe('through the API of a control plane whose custom_http backend is an anchor backend', () => {
  let srv: TestServer;
  let id = '';
  beforeAll(async () => {
    srv = await startTestServer({
      providers: { custom_http: { enabled: true, base_url: frontUrl, api_key: KEY, timeout: '5s' } },
    });
    const sb = await call(srv.url, 'POST', '/api/v1/sandboxes', { provider: 'custom_http' });
    expect(sb.status, sb.text).toBe(201);
    id = sb.body.id;
  });
  afterAll(async () => {
    if (id) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    await srv?.close();
  });

  it('buffered exec: the exit code and output, exactly', async () => {
    const r = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo hello; echo oops >&2; exit 5' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ exit_code: 5, stdout: 'hello\n', stderr: 'oops\n' });
  });

  it('streamed exec: output lines, then (with exit_record) an exit record whose exit_code is null; spec-strict: chunks only', async () => {
    const lines = async (body: Record<string, unknown>) => {
      const r = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
        command: 'echo one; echo two >&2; exit 4',
        stream: true,
        ...body,
      });
      expect(r.status).toBe(200);
      return r.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { stream: string; data: string; exit_code?: number | null });
    };
    const withExit = await lines({ exit_record: true });
    expect(withExit.filter((l) => l.stream === 'stdout').map((l) => l.data)).toEqual(['one\n']);
    expect(withExit.filter((l) => l.stream === 'stderr').map((l) => l.data)).toEqual(['two\n']);
    expect(withExit.at(-1)).toMatchObject({ stream: 'exit', data: '', exit_code: null });
    const strict = await lines({});
    expect(strict.map((l) => l.stream).sort()).toEqual(['stderr', 'stdout']);
  });
});
