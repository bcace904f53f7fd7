/**
 * Secret canaries and signals (issue 12, defect 2). Canaries go to `sbx serve` (its API key, a
 * DSN-like setting, an unrelated env var) and to another sandbox's running exec (env); an exec in
 * each provider then reads every /proc/<pid>/environ and cmdline it can, its own env, and greps
 * what it can read under / (bounded in time). No canary may appear there, nor in serve's logs,
 * diagnostics, metrics, error bodies or database file. Then an exec tries `kill -9` on every pid
 * it sees: the server must still answer.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  api,
  DOCKER,
  ensureBuilt,
  installationOf,
  PROOT,
  providerConfig,
  record,
  removeDockerInstallation,
  serve,
  skipWhy,
  tempDir,
  type Served,
} from './harness.js';

// Built at run time so no file on disk (this one included) holds a marker a grep could find.
const MARK = ['REL', 'CAN', 'ARY'].join('');
const canary = () => `${MARK}${randomBytes(8).toString('hex')}`;

/** The reading exec: /proc environ + cmdline of every pid, its env, a bounded grep of / (not /proc, /sys, /dev). */
const SCAN = [
  'm=REL; m="${m}CAN"; m="${m}ARY"',
  'for p in /proc/[0-9]*; do echo "== $p"; tr "\\000" " " < "$p/environ" 2>/dev/null; echo; tr "\\000" " " < ' +
    '"$p/cmdline" 2>/dev/null; echo; done',
  'echo "== env"; env',
  'echo "== grep"',
  // One deadline for the whole walk (10 s; on mock that is the host's whole tree), each grep
  // bounded by what is left of it.
  'end=$(( $(date +%s) + 10 ))',
  'for d in /*; do case "$d" in /proc|/sys|/dev) continue;; esac; left=$(( end - $(date +%s) )); [ "$left" -gt ' +
    '0 ] || break; timeout "$left" grep -r -a -o -E "${m}[0-9a-f]{16}" "$d" 2>/dev/null | head -n 50; done',
  'echo "== done"',
].join('\n');

/** Lists the pids the sandbox sees, with their command names. */
const PIDS = 'for p in /proc/[0-9]*; do echo "${p#/proc/} $(cat $p/comm 2>/dev/null)"; done';

/** Tries kill -9 on every pid it sees except itself. */
const KILL_ALL = 'for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = "$$" ] || kill -9 "$n" 2>/dev/null; done; echo tried';

type Provider = 'mock' | 'proot' | 'docker';
const enabled: Record<Provider, boolean> = { mock: true, proot: PROOT, docker: DOCKER };

function found(haystack: string, canaries: Record<string, string>): string[] {
  return Object.entries(canaries)
    .filter(([, v]) => haystack.includes(v))
    .map(([k]) => k);
}

async function isolation(provider: Provider): Promise<void> {
  const t = tempDir(`iso-${provider}`);
  const home = join(t.dir, 'home');
  const canaries = { api_key: canary(), dsn_password: canary(), unrelated_env: canary(), other_exec_env: canary() };
  const key = canaries.api_key;
  const H = { 'x-api-key': key };
  let s: Served | undefined;
  let installation = '';
  try {
    s = await serve(home, {
      config: providerConfig(provider, home, t.dir),
      env: {
        SVC_AUTH_API_KEY: key,
        SVC_DATABASE_DSN: `postgres://sbx:${canaries.dsn_password}@db.invalid:5432/sbx`,
        RELIABILITY_UNRELATED_SECRET: canaries.unrelated_env,
      },
    });
    installation = await installationOf(home);
    const victim = await api(s.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' }, H);
    expect(victim.status).toBe(201);
    const reader = await api(s.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' }, H);
    expect(reader.status).toBe(201);
    // Another sandbox's exec holds a secret in its env while the reader looks around.
    const victimExec = api(
      s.url,
      'POST',
      `/api/v1/sandboxes/${victim.json.id}/exec`,
      { command: 'sleep 45', env: { VICTIM_TOKEN: canaries.other_exec_env }, timeout: '60s' },
      H,
      90_000,
    );
    await new Promise((r) => setTimeout(r, 1500));
    const scanStarted = Date.now();
    const scan = await api(s.url, 'POST', `/api/v1/sandboxes/${reader.json.id}/exec`, { command: SCAN, timeout: '90s' }, H, 120_000);
    expect(scan.status).toBe(200);
    expect(scan.json.stdout).toContain('== done');
    const scanMs = Date.now() - scanStarted;
    const inExec = found(scan.text, canaries);

    // Error bodies: a handful of typical failures.
    const errors = await Promise.all([
      api(s.url, 'GET', '/api/v1/sandboxes', undefined, { 'x-api-key': 'wrong' }),
      api(s.url, 'GET', '/api/v1/sandboxes/sb-nope', undefined, H),
      api(s.url, 'POST', '/api/v1/sandboxes', '{bad json', H),
      api(s.url, 'POST', `/api/v1/sandboxes/${reader.json.id}/exec`, { command: 'sleep 5', timeout: '1s' }, H),
      api(s.url, 'GET', `/api/v1/sandboxes/${reader.json.id}/files?path=${encodeURIComponent('/nope/none')}`, undefined, H),
      api(s.url, 'GET', '/api/v1/admin/audit', undefined, { 'x-api-key': key.slice(0, -1) }),
      api(s.url, 'POST', '/api/v1/providers/test', {}, H),
    ]);
    const errorText = errors.map((e) => e.text).join('\n');
    const obs = await Promise.all(
      ['/api/v1/diagnostics', '/api/v1/metrics', '/api/v1/metrics/prometheus', '/api/v1/health', '/api/v1/providers'].map((p) =>
        api(s!.url, 'GET', p, undefined, H),
      ),
    );
    for (const o of obs) expect(o.status).toBe(200);
    const obsText = obs.map((o) => o.text).join('\n');

    // Signals: look first; a sandbox that sees the server (or the host's processes) is not sent a
    // kill loop, since on the host it would kill everything this user owns.
    const pids = await api(s.url, 'POST', `/api/v1/sandboxes/${reader.json.id}/exec`, { command: PIDS, timeout: '30s' }, H);
    const seen = (pids.json?.stdout ?? '')
      .split('\n')
      .filter(Boolean)
      .map((l: string) => l.split(' '));
    const seesServer = seen.some(([pid, comm]: string[]) => Number(pid) === s!.pid || comm === 'node' || Number(pid) === process.pid);
    let killTried = false;
    let aliveAfterKill = true;
    const killStarted = Date.now();
    if (!seesServer && seen.length < 40) {
      const k = await api(s.url, 'POST', `/api/v1/sandboxes/${reader.json.id}/exec`, { command: KILL_ALL, timeout: '30s' }, H).catch(
        (e: Error) => ({ status: 0, text: e.message, json: undefined }),
      );
      killTried = k.status !== 0;
      await new Promise((r) => setTimeout(r, 500));
      aliveAfterKill = s.alive() && (await api(s.url, 'GET', '/api/v1/health', undefined, H)).status === 200;
    }
    const killMs = Date.now() - killStarted;
    // Destroying the victim ends its sleeping exec.
    await api(s.url, 'DELETE', `/api/v1/sandboxes/${victim.json.id}`, undefined, H);
    await victimExec.catch(() => undefined);
    await api(s.url, 'DELETE', `/api/v1/sandboxes/${reader.json.id}`, undefined, H);
    await s.stop();

    const logText = s.log();
    const dbText = ['sbx.db', 'sbx.db-wal', 'sbx.db-shm']
      .map((f) => join(home, '.sbx', f))
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f).toString('latin1'))
      .join('\n');
    const figures = {
      canaries: Object.keys(canaries).length,
      scan_ms: scanMs,
      kill_loop_ms: killMs,
      proc_entries_read: (scan.text.match(/== \/proc\//g) ?? []).length,
      found_by_exec: inExec,
      found_in_logs: found(logText, canaries),
      found_in_observability: found(obsText, canaries),
      found_in_error_bodies: found(errorText, canaries),
      found_in_database: found(dbText, canaries),
      pids_visible_to_exec: seen.length,
      exec_sees_server: seesServer,
      kill_loop_run: killTried,
      server_alive_after_kill_loop: killTried ? aliveAfterKill : 'not run: the sandbox sees host processes',
    };
    record('isolation', provider, figures);
    expect(figures).toMatchObject({
      found_by_exec: [],
      found_in_logs: [],
      found_in_observability: [],
      found_in_error_bodies: [],
      found_in_database: [],
      exec_sees_server: false,
    });
    expect(killTried).toBe(true);
    expect(aliveAfterKill).toBe(true);
  } finally {
    await s?.kill9();
    if (provider === 'docker') await removeDockerInstallation(installation || (await installationOf(home).catch(() => '')));
    t.remove();
  }
}

describe('secret canaries and signals from inside a sandbox', () => {
  for (const provider of ['mock', 'proot', 'docker'] as const) {
    const flag = provider === 'docker' ? 'SBX_TEST_DOCKER' : 'SBX_TEST_PROOT';
    it.skipIf(!enabled[provider])(
      `${provider}: no canary readable or leaked; the server survives kill -9 of every visible pid ` +
        `${enabled[provider] ? '' : skipWhy(flag)}`,
      async () => {
        ensureBuilt();
        await isolation(provider);
      },
      150_000,
    );
  }
});
