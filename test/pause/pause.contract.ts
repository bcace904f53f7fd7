/**
 * Pause and resume against a real provider (DESIGN.md §16), through the HTTP API of a real server:
 * a counter process stops advancing while the sandbox is paused and goes on after a resume; an exec
 * on a paused sandbox resumes it first; a pause while an exec is in flight is 409. Run by the mock,
 * proot, docker and worker suites.
 */
import { expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { waitFor } from '../helpers/wait.js';

export interface PauseTarget {
  url: string;
  spawn(): Promise<string>;
  headers?: Record<string, string>;
}

const COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > sbx-counter.new; mv sbx-counter.new sbx-counter; sleep 0.1; done';

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
  await waitFor(
    'the counter counts',
    async () => {
      const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'cat sbx-counter 2>/dev/null || echo 0' }, t.headers);
      return Number(String(r.body.stdout).trim()) > 2;
    },
    15_000,
    100,
  );
}

/** Waits until the counter of `id` went `steps` past `from`; returns its value then. */
export const counterPast = (t: PauseTarget, id: string, from: number, steps: number): Promise<number> =>
  waitFor(
    `the counter of ${id} passes ${from + steps}`,
    async () => {
      const n = await readCounter(t, id);
      return n >= from + steps ? n : 0;
    },
    15_000,
    100,
  );

export function pauseContract(target: () => PauseTarget): void {
  it('a counter stops while paused and goes on after resume', async () => {
    const t = target();
    const id = await t.spawn();
    // A second sandbox's counter, never paused, is the clock: while it steps ten times the paused one stays.
    const clock = await t.spawn();
    await Promise.all([startCounter(t, id), startCounter(t, clock)]);
    const lead = (await readCounter(t, clock)) - (await readCounter(t, id));
    const p = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers);
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    expect(p.body.state).toBe('paused');
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('paused');
    // Read from the host side while paused would resume it (an exec does): the clock's steps are the wait.
    await counterPast(t, clock, await readCounter(t, clock), 10);
    // Still paused after a while: nothing woke it (GET is no activity).
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('paused');
    const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/resume`, undefined, t.headers);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.state).toBe('running');
    const after = await readCounter(t, id);
    const clockAfter = await readCounter(t, clock);
    // It goes on after the resume, stepping with the clock…
    await counterPast(t, id, after, 4);
    // …and it did not count through the ten steps the clock made while it was paused: the clock's
    // lead grew by about ten (a step or two of reading apart aside).
    expect(clockAfter - after - lead).toBeGreaterThanOrEqual(7);
    await call(t.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, t.headers);
    await call(t.url, 'DELETE', `/api/v1/sandboxes/${clock}`, undefined, t.headers);
  }, 60_000);

  it('an exec on a paused sandbox resumes it first; a pause during an exec is 409', async () => {
    const t = target();
    const id = await t.spawn();
    await startCounter(t, id);
    expect((await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers)).status).toBe(200);
    const before = performance.now();
    const n1 = await readCounter(t, id);
    const firstMs = performance.now() - before;
    expect(n1).toBeGreaterThan(0);
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).body.state).toBe('running');
    await counterPast(t, id, n1, 1);
    // A first exec after a pause pays the resume: bounded, far below a second.
    expect(firstMs).toBeLessThan(5_000);

    // An exec held in flight until the test lets it go: the pause meanwhile is refused.
    const hold = 'echo > sbx-held; while [ ! -e sbx-release ]; do sleep 0.05; done; echo done';
    const long = call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: hold, timeout: '30s' }, t.headers);
    await waitFor('the held exec runs', async () => {
      const r = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'test -e sbx-held && echo held' }, t.headers);
      return r.body.stdout === 'held\n';
    });
    const refused = await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    await call(t.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'touch sbx-release' }, t.headers);
    expect((await long).body.stdout).toBe('done\n');
    expect((await call(t.url, 'POST', `/api/v1/sandboxes/${id}/pause`, undefined, t.headers)).status).toBe(200);
    // Destroying a paused sandbox works (its frozen processes are thawed to die).
    expect((await call(t.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, t.headers)).status).toBe(200);
    expect((await call(t.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, t.headers)).status).toBe(404);
  }, 60_000);
}
