/**
 * Operations racing destroys on docker (issue 12, defect 3): 150 operations (exec, files, logs,
 * extend, get) on 10 sandboxes while each is destroyed mid-flight. Every answer is a success or a
 * typed 4xx (404 once the sandbox is gone), never a 5xx.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  api,
  DOCKER,
  ensureBuilt,
  installationOf,
  providerConfig,
  record,
  removeDockerInstallation,
  serve,
  skipWhy,
  tempDir,
  type Served,
} from './harness.js';

const SANDBOXES = 10;
const OPS_PER_SANDBOX = 15; // plus one destroy each

function operations(url: string, id: string): Array<() => Promise<{ status: number; text: string }>> {
  const base = `/api/v1/sandboxes/${id}`;
  const q = encodeURIComponent;
  return [
    () => api(url, 'POST', `${base}/exec`, { command: 'echo hi; sleep 0.2; echo bye' }),
    () => api(url, 'POST', `${base}/exec`, { command: 'head -c 100000 /dev/zero | tr "\\000" a', stream: true }),
    () => api(url, 'POST', `${base}/exec`, { command: 'sleep 1' }),
    () => api(url, 'POST', `${base}/files`, { path: '/workspace/a.txt', content: 'x'.repeat(10_000) }),
    () => api(url, 'GET', `${base}/files?path=${q('/workspace/a.txt')}`),
    () => api(url, 'GET', `${base}/files/list?path=${q('/workspace')}`),
    () => api(url, 'GET', `${base}/files/stat?path=${q('/workspace')}`),
    () => api(url, 'GET', `${base}/files/glob?pattern=${q('/workspace/*')}`),
    () => api(url, 'POST', `${base}/files/chmod`, { path: '/workspace', mode: '0755' }),
    () => api(url, 'POST', `${base}/files/move`, { old_path: '/workspace/a.txt', new_path: '/workspace/b.txt' }),
    () => api(url, 'DELETE', `${base}/files?path=${q('/workspace/b.txt')}`),
    () => api(url, 'GET', `${base}/logs?lines=10`),
    () => api(url, 'POST', `${base}/exec`, { command: 'cat', args: ['/etc/passwd'], mode: 'argv' }),
    () => api(url, 'POST', `${base}/extend`, { ttl: '20m' }),
    () => api(url, 'GET', base),
    () => api(url, 'DELETE', base),
  ];
}

describe('operations racing destroys', () => {
  it.skipIf(!DOCKER)(
    `docker: 150 operations racing 10 destroys answer no 5xx ${DOCKER ? '' : skipWhy('SBX_TEST_DOCKER')}`,
    async () => {
      ensureBuilt();
      const t = tempDir('destroy-race');
      const home = join(t.dir, 'home');
      let s: Served | undefined;
      try {
        s = await serve(home, { config: providerConfig('docker', home, t.dir) });
        const url = s.url;
        const ids: string[] = [];
        for (let i = 0; i < SANDBOXES; i++) {
          const r = await api(url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
          expect(r.status).toBe(201);
          ids.push(r.json.id);
        }
        // Warm each sandbox so its first exec is not what races.
        await Promise.all(ids.map((id) => api(url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' })));
        const statuses: Record<string, number> = {};
        const fives: string[] = [];
        const runs: Promise<void>[] = [];
        for (const [i, id] of ids.entries()) {
          const ops = operations(url, id);
          for (const [j, op] of ops.entries()) {
            const isDestroy = j === ops.length - 1;
            runs.push(
              (async () => {
                // Destroys land in the middle of the operations of their sandbox.
                await new Promise((r) => setTimeout(r, isDestroy ? 150 + i * 20 : j * 20));
                const r = await op();
                statuses[r.status] = (statuses[r.status] ?? 0) + 1;
                if (r.status >= 500) fives.push(`${isDestroy ? 'destroy' : `op${j}`} ${r.status} ${r.text.slice(0, 200)}`);
              })(),
            );
          }
        }
        await Promise.all(runs);
        const after = await Promise.all(ids.map((id) => api(url, 'GET', `/api/v1/sandboxes/${id}`)));
        const figures = {
          sandboxes: SANDBOXES,
          operations: SANDBOXES * OPS_PER_SANDBOX,
          destroys: SANDBOXES,
          statuses,
          status_5xx: fives.length,
          first_5xx: fives.slice(0, 5),
          gone_after: after.filter((r) => r.status === 404).length,
        };
        record('destroy_race', 'docker', figures);
        expect(figures.operations).toBe(150);
        expect(fives).toEqual([]);
        expect(figures.gone_after).toBe(SANDBOXES);
        expect(s.alive()).toBe(true);
      } finally {
        await s?.stop();
        await removeDockerInstallation(await installationOf(home).catch(() => ''));
        t.remove();
      }
    },
    180_000,
  );
});
