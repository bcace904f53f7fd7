/**
 * Issue 30 item 9 (DESIGN.md §10): after `kill -9` of `sbx serve` with mock (and proot) execs
 * running and background processes left by earlier execs, no process of those sandboxes is alive
 * once the restarted server listens — before it serves a first request, with no grace period. The
 * sandboxes keep their records and files, not their processes; a new exec works.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { api, ensureBuilt, PROOT, providerConfig, serve, skipWhy, sleep, tempDir, until, type Served } from '../reliability/harness.js';

const SANDBOXES = 3;

/** Host pids (not zombies) whose command line holds `marker`. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) out.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return out;
}

async function crash(provider: 'mock' | 'proot'): Promise<void> {
  const t = tempDir(`crash-keeper-${provider}`);
  const home = `${t.dir}/home`;
  // Distinct sleep lengths carry the marker into each process's command line.
  const base = 400_000 + Math.floor(Math.random() * 100_000);
  const marker = (i: number, kind: number) => `${base + i * 10 + kind}`;
  let s: Served | undefined;
  const ids: string[] = [];
  try {
    const config = providerConfig(provider, home, t.dir);
    s = await serve(home, { config });
    const url = s.url;
    const running: Array<Promise<unknown>> = [];
    for (let i = 0; i < SANDBOXES; i++) {
      const box = await api(url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
      expect(box.status).toBe(201);
      ids.push(box.json.id);
      await api(url, 'POST', `/api/v1/sandboxes/${box.json.id}/files`, { path: '/workspace/kept.txt', content: `file ${i}` });
      // Left running by an exec that returned: a detached one and a plain background one.
      const left = await api(url, 'POST', `/api/v1/sandboxes/${box.json.id}/exec`, {
        command: `setsid sleep ${marker(i, 1)} >/dev/null 2>&1 & sleep ${marker(i, 2)} >/dev/null 2>&1 & echo ok`,
        timeout: '30s',
      });
      expect(left.json).toMatchObject({ exit_code: 0, stdout: 'ok\n' });
      // And an exec still running when the server dies.
      running.push(
        api(url, 'POST', `/api/v1/sandboxes/${box.json.id}/exec`, { command: `sleep ${marker(i, 3)}`, timeout: '5m' }, {}, 60_000).catch(
          () => undefined,
        ),
      );
    }
    const all = Array.from({ length: SANDBOXES }, (_, i) => [1, 2, 3].map((k) => marker(i, k))).flat();
    await until(() => all.every((m) => processesWith(`sleep\0${m}`).length > 0), 10_000, 50);

    await s.kill9();
    await Promise.all(running);
    s = await serve(home, { config });
    // Listening, nothing served yet: no process of those sandboxes is alive (no waiting here).
    const alive = all.flatMap((m) => processesWith(`sleep\0${m}`));
    expect(alive, 'sandbox processes alive after the restart').toEqual([]);

    // Records and files stay; processes do not; the sandbox takes new execs.
    for (const [i, id] of ids.entries()) {
      const rec = await api(s.url, 'GET', `/api/v1/sandboxes/${id}`);
      expect(rec.json.state).toBe('running');
      const e = await api(s.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
        command: 'cat kept.txt; echo; ps -o comm= | grep -c sleep',
      });
      expect(e.json.stdout).toBe(`file ${i}\n0\n`);
    }
  } finally {
    if (s) for (const id of ids) await api(s.url, 'DELETE', `/api/v1/sandboxes/${id}`).catch(() => undefined);
    await s?.stop();
    await sleep(100);
    t.remove();
  }
}

describe('kill -9 of serve with execs and background processes, then restart', () => {
  it('mock: no process of the sandboxes is alive when the restarted server listens', async () => {
    ensureBuilt();
    await crash('mock');
  }, 120_000);
  it.skipIf(!PROOT)(
    `proot: no process of the sandboxes is alive when the restarted server listens ${PROOT ? '' : skipWhy('SBX_TEST_PROOT')}`,
    async () => {
      ensureBuilt();
      await crash('proot');
    },
    120_000,
  );
});
