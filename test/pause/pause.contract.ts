/**
 * Pause and resume against a real provider (DESIGN.md §16), through the HTTP API of a real server:
 * a counter process stops advancing while the sandbox is paused and goes on after a resume; an exec
 * on a paused sandbox resumes it first; a pause while an exec is in flight is 409. Run by the mock,
 * proot, docker and worker suites.
 */
import { expect, it } from 'vitest';
import { call } from '../helpers/http.js';

export interface PauseTarget {
  url: string;
  spawn(): Promise<string>;
  headers?: Record<string, string>;
}

const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > sbx-counter.new; mv sbx-counter.new sbx-counter; sleep 0.1; done';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function readCounter(t: PauseTarget, id: string): Promise<number> {
  const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'cat sbx-counter' }, t.headers);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const n = Number(String(r.body.stdout).trim());
  expect(n, `counter read ${JSON.stringify(r.body.stdout)}`).toBeGreaterThan(0);
  return n;
}

/** Starts the counter as a background process and waits until it counts. */
export async function startCounter(t: PauseTarget, id: string): Promise<void> {
  const p = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/processes`, { command: COUNTER }, t.headers);
  expect(p.status, JSON.stringify(p.body)).toBe(201);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'cat sbx-counter 2>/dev/null || echo 0' }, t.headers);
    if (Number(String(r.body.stdout).trim()) > 2) return;
    if (Date.now() > deadline) throw new Error('the counter did not start');
    await sleep(100);
  }
}

export function pauseContract(target: () => PauseTarget): void {
  it('a counter stops while paused and goes on after resume', async () => {
    const t = target();
    const id = await t.spawn();
    await startCounter(t, id);
    const t0 = performance.now();
    const before = await readCounter(t, id);
    const p = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers);
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    expect(p.body.state).toBe('paused');
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('paused');
    await sleep(1_500);
    // Still paused after a while: nothing woke it (GET is no activity).
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('paused');
    const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/resume`, undefined, t.headers);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.state).toBe('running');
    const after = await readCounter(t, id);
    const t1 = performance.now();
    await sleep(1_500);
    const later = await readCounter(t, id);
    const rate = (later - after) / ((performance.now() - t1) / 1000);
    // It goes on after the resume…
    expect(later - after).toBeGreaterThanOrEqual(4);
    // …and between the two reads around the pause it counted only for the time it was not frozen
    // (the pause, resume and exec calls themselves), never through the 1.5 s it was paused.
    const awakeS = (t1 - t0) / 1000 - 1.5;
    expect(after - before).toBeLessThanOrEqual(Math.ceil(rate * Math.max(awakeS, 0)) + 3);
    await call(t.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, t.headers);
  }, 60_000);

  it('an exec on a paused sandbox resumes it first; a pause during an exec is 409', async () => {
    const t = target();
    const id = await t.spawn();
    await startCounter(t, id);
    expect((await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers)).status).toBe(200);
    await sleep(500);
    const before = performance.now();
    const n1 = await readCounter(t, id);
    const firstMs = performance.now() - before;
    expect(n1).toBeGreaterThan(0);
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('running');
    await sleep(600);
    expect(await readCounter(t, id)).toBeGreaterThan(n1);
    // A first exec after a pause pays the resume: bounded, far below a second.
    expect(firstMs).toBeLessThan(5_000);

    const long = call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'sleep 2; echo done' }, t.headers);
    await sleep(700);
    const refused = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    expect((await long).body.stdout).toBe('done\n');
    expect((await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers)).status).toBe(200);
    // Destroying a paused sandbox works (its frozen processes are thawed to die).
    expect((await call(t.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, t.headers)).status).toBe(200);
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).status).toBe(404);
  }, 60_000);
}
