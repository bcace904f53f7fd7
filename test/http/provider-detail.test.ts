/**
 * `GET /api/v1/providers/{name}` on a real server: `sandbox_count` is a count by index (DESIGN.md
 * §13) — right after spawns and destroys, and still answered while listing sandboxes is made to
 * fail — and a provider's configured URL never shows its credentials (user-info, query, fragment).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const PASSWORD = 'pa55-hosted-url-secret';
const QUERY = 'qs-hosted-url-secret';
let srv: TestServer;

beforeAll(async () => {
  srv = await startTestServer({
    providers: {
      hosted: {
        enabled: true,
        base_url: `https://agent:${PASSWORD}@hosted.invalid/v1?token=${QUERY}#frag`,
        api_key: 'sbx-test-hosted-key-0123456789',
      },
    },
  });
});

afterAll(async () => {
  await srv?.close();
});

describe('provider detail', () => {
  it('a configured URL is shown without its credentials', async () => {
    const r = await call(srv.url, 'GET', '/api/v1/providers/hosted');
    expect(r.status).toBe(200);
    expect(r.body.config).toMatchObject({ runtime: 'e2b', base_url: 'https://hosted.invalid/v1' });
    expect(r.text).not.toContain(PASSWORD);
    expect(r.text).not.toContain(QUERY);
    expect(r.text).not.toContain('agent@');
    expect(r.body.sandbox_count).toBe(0);
    // Its health error names the URL too: the same rule there, and in the list.
    expect(r.body.health.error).toMatch(/^https:\/\/hosted\.invalid\/v1: /);
    const list = await call(srv.url, 'GET', '/api/v1/providers');
    expect(list.text).toContain('hosted.invalid');
    expect(list.text).not.toContain(PASSWORD);
    expect(list.text).not.toContain(QUERY);
  });

  it('sandbox_count counts the provider’s sandboxes by index, never by listing them', async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await call(srv.url, 'POST', '/api/v1/sandboxes', { provider: 'mock', ttl: '5m' })).body.id);
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${made[0]}`)).status).toBe(200);
    const store = srv.plane.deps.store;
    const list = store.listSandboxes.bind(store);
    let listed = 0;
    store.listSandboxes = async (...args) => {
      listed++;
      return list(...args);
    };
    try {
      const r = await call(srv.url, 'GET', '/api/v1/providers/mock');
      expect(r.status).toBe(200);
      expect(r.body.sandbox_count).toBe(2);
      expect(listed).toBe(0);
      expect((await call(srv.url, 'GET', '/api/v1/providers/hosted')).body.sandbox_count).toBe(0);
    } finally {
      store.listSandboxes = list;
    }
  });
});
