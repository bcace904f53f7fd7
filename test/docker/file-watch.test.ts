/**
 * File watch on docker (DESIGN §16): the sandbox's sbx-agent watches with inotify inside the
 * container, over its one multiplexed connection — no engine call per event, no polling. The watch
 * contract through a real server, and a sandbox spawned with the agent off answers 501.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { openWatch } from '../helpers/watch.js';
import { watchContract, watchTarget } from '../http/file-watch.contract.js';
import { requireAgentBinary } from './agent-helpers.js';

describe.skipIf(PROVIDER_SKIP.docker !== undefined)(providerTitle('docker', 'file watch on docker, through sbx-agent'), () => {
  beforeAll(() => {
    requireAgentBinary();
  });
  const server = useProviderServer('docker');
  watchContract(() => watchTarget(server()));

  it('an exec’s write reaches the watcher promptly (the event, not a poll)', async () => {
    const srv = server();
    const id = await srv.spawn();
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const w = await openWatch(srv.url, id, '/w');
    const t0 = performance.now();
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo hi > /w/fast' });
    await w.until((e) => e.some((x) => x.path === '/w/fast' && x.type === 'write'), 5000);
    expect(performance.now() - t0).toBeLessThan(2000);
    w.close();
  });
});

describe.skipIf(PROVIDER_SKIP.docker !== undefined)(providerTitle('docker', 'file watch on docker without the agent'), () => {
  const server = useProviderServer('docker', { providers: { docker: { agent: 'off' } } });

  it('answers 501 not_implemented (never a poll of the engine)', async () => {
    const srv = server();
    const id = await srv.spawn();
    const w = await openWatch(srv.url, id, '/');
    expect(w.status).toBe(501);
    expect(w.error?.code).toBe('not_implemented');
  });
});
