/**
 * File watch on the host providers (DESIGN §16): mock always, proot with SBX_TEST_PROOT=1 — the
 * host-mode sbx-agent over the sandbox root, through a real server. Needs the agent binary
 * (`node scripts/build-agent.mjs`, part of `npm run build`).
 */
import { describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { brief, openWatch } from '../helpers/watch.js';
import { watchContract, watchTarget } from './file-watch.contract.js';

describe('file watch on mock', () => {
  const server = useProviderServer('mock');
  watchContract(() => watchTarget(server()));

  it('a tree of more than 4,096 directories gets overflow and the stream ends', async () => {
    const srv = server();
    const id = await srv.spawn();
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/big/seed', content: '' });
    const made = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: 'i=0; while [ $i -lt 4100 ]; do mkdir d$i; i=$((i+1)); done',
      workdir: '/big',
      timeout: '60s',
    });
    expect(made.body.exit_code).toBe(0);
    const w = await openWatch(srv.url, id, '/big');
    expect(w.status).toBe(200);
    await w.until(() => false);
    expect(w.events.map((e) => e.type)).toEqual(['overflow']);
    expect(w.ended).toBe(true);
    expect(srv.plane.deps.files.watcher.count(id)).toBe(0);
  }, 60_000);
});

describe.skipIf(PROVIDER_SKIP.proot !== undefined)(providerTitle('proot', 'file watch on proot'), () => {
  const server = useProviderServer('proot');
  watchContract(() => watchTarget(server()));
});

describe('file watch of pool sandboxes on mock', () => {
  const server = useProviderServer('mock', {
    pool: { enabled: true, max_vms: 1, max_users_per_vm: 2 },
    auth: { admin_api_key: 'pool-admin-key-0123456789' },
  });
  const as = (user: string) => ({ 'x-user-id': user });

  it('a tenant sees its own workspace only, with its own paths; another tenant’s changes never reach it', async () => {
    const srv = server();
    const alice = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'))).body.id as string;
    const bob = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('bob'))).body.id as string;
    const w = await openWatch(srv.url, alice, '/', { headers: as('alice') });
    expect(w.status, JSON.stringify(w.error)).toBe(200);
    await call(srv.url, 'POST', `/api/v1/sandboxes/${bob}/files`, { path: '/b.txt', content: 'bob' }, as('bob'));
    await call(srv.url, 'POST', `/api/v1/sandboxes/${alice}/files`, { path: '/d/a.txt', content: 'alice' }, as('alice'));
    await w.until((e) => e.some((x) => x.path === '/d/a.txt' && x.type === 'write'));
    expect(brief(w.events)).toEqual(['create /d', 'write /d/a.txt']);
    // Bob cannot watch Alice's sandbox.
    expect((await openWatch(srv.url, alice, '/', { headers: as('bob') })).status).toBe(404);
    w.close();
  });
});
