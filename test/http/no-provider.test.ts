import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** A logger whose lines the test can read. */
function captureLogger(): { logger: Logger; lines: () => { level: number; msg: string }[] } {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString('utf8'));
      cb();
    },
  });
  const logger = pino({ level: 'info' }, sink) as unknown as Logger;
  return {
    logger,
    lines: () =>
      out
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { level: number; msg: string }),
  };
}

/**
 * DESIGN §3 Defaults: `providers.default: auto` never picks mock. Without an isolating provider
 * (here: docker pointed at a socket that does not exist, no proot rootfs) `serve` starts, /ready
 * says so, and a spawn answers 503 `unavailable` with how to fix it.
 */
describe('auto with no isolating provider', () => {
  let srv: TestServer;
  const log = captureLogger();

  beforeAll(async () => {
    srv = await startTestServer(
      { providers: { default: 'auto', docker: { socket_path: '/nonexistent/sbx-test/docker.sock' }, proot: { rootfs: '' } } },
      { logger: log.logger },
    );
  });
  afterAll(async () => srv?.close());

  it('starts without any provider and warns how to get one', () => {
    const warnings = log
      .lines()
      .filter((l) => l.level === 40)
      .map((l) => l.msg);
    expect(warnings).toContain('docker: no engine answers at unix:///nonexistent/sbx-test/docker.sock (providers.docker.socket_path)');
    expect(
      warnings.some((m) => m.startsWith('no isolating provider is available on this node') && m.includes('providers.default: mock')),
    ).toBe(true);
    expect(log.lines().some((l) => l.msg.includes('provider "mock"'))).toBe(false);
  });

  it('/ready is 503 with ready_providers 0 and names the fix', async () => {
    const res = await call(srv.url, 'GET', '/api/v1/ready');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ status: 'not_ready', ready_providers: 0, total_providers: 0, providers: [], code: 'unavailable' });
    expect(res.body.message).toMatch(/^no isolating provider is available on this node: start Docker/);
    expect(res.body.message).toContain('providers.proot.rootfs');
    expect(res.body.message).toContain('providers.default: mock');
  });

  it('a spawn answers 503 unavailable with the fix; nothing runs on the host', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('unavailable');
    expect(res.body.message).toMatch(/^no isolating provider is available on this node/);
    expect(res.body.message).toContain('providers.default: mock');
    const none = await call(srv.url, 'POST', '/api/v1/sandboxes');
    expect(none.status).toBe(503);
    const named = await call(srv.url, 'POST', '/api/v1/sandboxes', { provider: 'mock' });
    expect(named.status).toBe(400);
    expect(named.body.code).toBe('bad_request');
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).body).toEqual([]);
  });

  it('providers, health, provider test and diagnostics answer with zero providers', async () => {
    const list = await call(srv.url, 'GET', '/api/v1/providers');
    expect(list.status).toBe(200);
    expect(list.body).toEqual([]);
    const health = await call(srv.url, 'GET', '/api/v1/health');
    expect(health.status).toBe(200);
    expect(health.body.providers).toEqual({ total: 0, healthy: 0, default: 'none' });
    const test = await call(srv.url, 'POST', '/api/v1/providers/test');
    expect(test.status).toBe(200);
    expect(test.body).toEqual({});
    const diag = await call(srv.url, 'GET', '/api/v1/diagnostics');
    expect(diag.status).toBe(200);
    expect(diag.body.providers).toEqual([]);
    expect((await call(srv.url, 'GET', '/api/v1/providers/mock')).status).toBe(404);
  });
});

describe('mock runs only when named', () => {
  it('providers.mock.enabled registers mock with a warning, but auto still never makes it the default', async () => {
    const log = captureLogger();
    const srv = await startTestServer(
      {
        providers: {
          default: 'auto',
          docker: { socket_path: '/nonexistent/sbx-test/docker.sock' },
          proot: { rootfs: '' },
          mock: { enabled: true },
        },
      },
      { logger: log.logger },
    );
    try {
      expect(
        log
          .lines()
          .some((l) => l.level === 40 && l.msg === 'provider "mock" is enabled: commands run directly on this host, without isolation'),
      ).toBe(true);
      const list = await call(srv.url, 'GET', '/api/v1/providers');
      expect(list.body.map((p: { name: string; default: boolean }) => [p.name, p.default])).toEqual([['mock', false]]);
      const unnamed = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(unnamed.status).toBe(503);
      expect(unnamed.body.code).toBe('unavailable');
      const named = await call(srv.url, 'POST', '/api/v1/sandboxes', { provider: 'mock' });
      expect(named.status).toBe(201);
      expect(named.body.provider).toBe('mock');
      const out = await call(srv.url, 'POST', `/api/v1/sandboxes/${named.body.id}/exec`, { command: 'echo', args: ['named'] });
      expect(out.body.stdout).toBe('named\n');
    } finally {
      await srv.close();
    }
  });

  it('providers.default: mock makes mock the default, with the warning', async () => {
    const log = captureLogger();
    const srv = await startTestServer({ providers: { default: 'mock' } }, { logger: log.logger });
    try {
      expect(
        log
          .lines()
          .some((l) => l.level === 40 && l.msg === 'provider "mock" is the default: commands run directly on this host, without isolation'),
      ).toBe(true);
      const ready = await call(srv.url, 'GET', '/api/v1/ready');
      expect(ready.status).toBe(200);
      expect(ready.body.ready_providers).toBe(1);
      const spawned = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(spawned.status).toBe(201);
      expect(spawned.body.provider).toBe('mock');
    } finally {
      await srv.close();
    }
  });
});
