/**
 * Memory under big payloads (issue 12, defect 5): `sbx serve` as a child process on the mock
 * provider; 8 concurrent ~63 MB base64 uploads, then 8 concurrent buffered execs printing near the
 * output cap. The serve process's peak RSS (VmHWM) must stay under 600 MB and its RSS be back
 * under 300 MB within 10 s; a request over `server.max_inflight_mb` may answer 503, never another 5xx.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, ensureBuilt, memoryOf, record, serve, sleep, tempDir, type Served } from './harness.js';

const UPLOADS = 8;
const RAW_BYTES = 47 * 1024 * 1024; // → ~62.7 MB of base64, under the 64 MB body limit
const OUTPUT_EXECS = 8;
const OUTPUT_BYTES = 15 * 1000 * 1000; // near the 16 MB default output cap
const PEAK_LIMIT_MB = 600;
const SETTLED_MB = 300;
const SETTLE_MS = 10_000;

async function measure(name: string, load: (s: Served, base: string) => Promise<number[]>): Promise<void> {
  const t = tempDir(`mem-${name}`);
  const home = join(t.dir, 'home');
  let s: Served | undefined;
  try {
    s = await serve(home, { config: { providers: { default: 'mock', mock: { root_dir: join(home, 'mock') } } } });
    const sb = await api(s.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    expect(sb.status).toBe(201);
    const idle = memoryOf(s.pid);
    let sampledPeak = 0;
    const sampler = setInterval(() => {
      try {
        sampledPeak = Math.max(sampledPeak, memoryOf(s!.pid).rss_mb);
      } catch {
        /* exited */
      }
    }, 25);
    const statuses = await load(s, `/api/v1/sandboxes/${sb.json.id}`);
    clearInterval(sampler);
    const afterLoad = memoryOf(s.pid);
    const doneAt = Date.now();
    let settledMs: number | null = null;
    let rss = afterLoad.rss_mb;
    while (Date.now() - doneAt <= SETTLE_MS) {
      rss = memoryOf(s.pid).rss_mb;
      if (rss < SETTLED_MB) {
        settledMs = Date.now() - doneAt;
        break;
      }
      await sleep(100);
    }
    const alive = s.alive() && (await api(s.url, 'GET', '/api/v1/health')).status === 200;
    const counts: Record<string, number> = {};
    // 0: the connection closed before an answer arrived (e.g. a 503 sent while the body was still uploading).
    for (const c of statuses) counts[c === 0 ? 'connection closed' : c] = (counts[c === 0 ? 'connection closed' : c] ?? 0) + 1;
    const figures = {
      idle_rss_mb: idle.rss_mb,
      peak_rss_mb: Math.max(afterLoad.hwm_mb, sampledPeak),
      rss_after_load_mb: afterLoad.rss_mb,
      rss_after_10s_mb: rss,
      ms_to_under_300_mb: settledMs,
      statuses: counts,
      server_alive: alive,
    };
    record('memory', name, figures);
    expect(statuses.filter((c) => c >= 500 && c !== 503)).toEqual([]);
    expect(alive).toBe(true);
    expect(figures.peak_rss_mb).toBeLessThan(PEAK_LIMIT_MB);
    expect(settledMs).not.toBeNull();
  } finally {
    await s?.stop();
    t.remove();
  }
}

describe('memory of the serve process under big payloads', () => {
  it(`${UPLOADS} concurrent ~63 MB base64 uploads: peak under ${PEAK_LIMIT_MB} MB, back under ${SETTLED_MB} MB within 10 s`, async () => {
    ensureBuilt();
    const content = randomBytes(RAW_BYTES).toString('base64');
    await measure('uploads_8x63MB_base64', async (s, base) => {
      const results = await Promise.all(
        Array.from({ length: UPLOADS }, (_, i) =>
          api(s.url, 'POST', `${base}/files`, `{"path":"/workspace/big-${i}.bin","encoding":"base64","content":"${content}"}`, {}, 120_000)
            .then((r) => r.status)
            .catch(() => 0),
        ),
      );
      return results;
    });
  }, 120_000);

  it(`${OUTPUT_EXECS} concurrent buffered execs printing ~15 MB each: peak under ${PEAK_LIMIT_MB} MB, back ` +
    `under ${SETTLED_MB} MB within 10 s`, async () => {
    await measure('big_output_8x15MB', async (s, base) => {
      const results = await Promise.all(
        Array.from({ length: OUTPUT_EXECS }, () =>
          api(s.url, 'POST', `${base}/exec`, { command: `head -c ${OUTPUT_BYTES} /dev/zero | tr '\\000' a`, timeout: '60s' }, {}, 120_000)
            .then((r) => (r.status === 200 && r.json.stdout.length !== OUTPUT_BYTES ? -1 : r.status))
            .catch(() => 0),
        ),
      );
      return results;
    });
  }, 120_000);
});
