/**
 * The tenant route × method matrix (issue 30, unit part): two owners with `auth.enforce_ownership`
 * and two pool tenants each try every route of the app against the other's sandbox, snapshot,
 * volume and process. The routes come from fastify's own table, so a new route fails this file
 * until it is attacked here or named in NOT_SANDBOX_SCOPED with a reason. Every attempt must be
 * refused as if the resource did not exist (404), and the owner then finds everything as it was.
 * Previews are not here: they are routed below fastify (the raw server's request listener, by
 * Host), which `inject` does not reach, and guarded by preview tokens, not owners
 * (test/http/preview.test.ts, integration tier).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { routeTable } from '../../../src/transports/http/route-table.js';
import { fakeClock, startUnitPlane, type UnitPlane, type UnitRes } from '../../helpers/unit-plane.js';
import {
  ADMIN_KEY,
  ADMIN_PREFIX,
  API_KEY,
  ATTACKS,
  type Attempt,
  NOT_SANDBOX_SCOPED,
  SECRET_NAME,
  refused,
  SECRET,
  sb,
  type Victim,
} from './tenant-attacks.js';

/** Reads an SSE answer for a few turns of the event loop, then ends it (the stream itself never ends). */
async function readStream(u: UnitPlane, a: Attempt, headers: Record<string, string>): Promise<UnitRes> {
  const res = await u.inject({ method: a.method as never, url: a.url, headers: { ...headers, ...a.headers }, payloadAsStream: true });
  const stream = res.stream();
  let text = '';
  stream.on('data', (c: Buffer) => (text += c.toString()));
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  stream.destroy();
  return { status: res.statusCode, headers: res.headers, body: undefined, text };
}

/** A WebSocket exec through `injectWS`: the upgrade's refusal, or every message until the socket closes. */
async function tryWebSocket(u: UnitPlane, a: Attempt, headers: Record<string, string>): Promise<UnitRes> {
  const app = u.plane.app as unknown as {
    injectWS(path: string, ctx: { headers: Record<string, string> }): Promise<import('ws').WebSocket>;
  };
  let ws: import('ws').WebSocket;
  try {
    ws = await app.injectWS(a.url, { headers });
  } catch (err) {
    const status = Number(/(\d{3})/.exec((err as Error).message)?.[1] ?? 0);
    return { status, headers: {}, body: undefined, text: (err as Error).message };
  }
  const messages: string[] = [];
  const closed = new Promise<void>((resolve) => ws.on('close', () => resolve()));
  ws.on('message', (m: Buffer) => messages.push(m.toString()));
  ws.send(JSON.stringify(a.body));
  // The server ends the socket after an error or an exit; bounded: a socket left open fails below.
  for (let i = 0; i < 50 && ws.readyState !== ws.CLOSED; i++) await Promise.race([closed, new Promise((r) => setImmediate(r))]);
  ws.terminate();
  return { status: 101, headers: {}, body: undefined, text: messages.join('\n') };
}

interface Scenario {
  title: string;
  config: Record<string, unknown>;
  /** File path of the secret as its owner's API shows it. */
  file: string;
  poolMode: boolean;
  totals: { attempts: number; successes: number; routes: number };
}

const auth = { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY };
const scenarios: Scenario[] = [
  {
    title: 'ownership enforced',
    config: { auth: { ...auth, enforce_ownership: true } },
    file: '/workspace/secret.txt',
    poolMode: false,
    totals: { attempts: 0, successes: 0, routes: 0 },
  },
  {
    title: 'pool tenants',
    config: { auth, pool: { enabled: true, max_vms: 1, max_users_per_vm: 4 } },
    file: '/secret.txt',
    poolMode: true,
    totals: { attempts: 0, successes: 0, routes: 0 },
  },
];

for (const sc of scenarios) {
  describe(`tenant matrix: ${sc.title}`, () => {
    let u: UnitPlane;
    let v: Victim;
    const as = (user: string) => ({ 'x-api-key': API_KEY, 'x-user-id': user });
    const alice = as('alice');
    const bob = as('bob');
    let before: { sandbox: unknown; files: unknown; logs: string; processes: unknown };

    /** What the owner sees of everything the attacker may have touched. */
    const ownerView = async () => {
      const get = await u.req('GET', sb(v), undefined, alice);
      const files = await u.req('GET', `${sb(v)}/files/list?path=${sc.file.slice(0, sc.file.lastIndexOf('/')) || '/'}`, undefined, alice);
      const logs = await u.req('GET', `${sb(v)}/logs`, undefined, alice);
      const procs = await u.req('GET', `${sb(v)}/processes`, undefined, alice);
      const secrets = await u.req('GET', '/api/v1/secrets', undefined, alice);
      return { sandbox: get.body, files: files.body, logs: logs.text, processes: procs.body, secrets: secrets.body };
    };

    beforeAll(async () => {
      fakeClock();
      u = await startUnitPlane(sc.config);
      const spawn = async (h: Record<string, string>) => {
        const res = await u.req('POST', '/api/v1/sandboxes', {}, h);
        expect(res.status, res.text).toBe(201);
        return res.body.id as string;
      };
      const victim = await spawn(alice);
      const own = await spawn(bob);
      expect((await u.req('POST', `/api/v1/sandboxes/${victim}/files`, { path: sc.file, content: SECRET }, alice)).status).toBe(200);
      expect((await u.req('POST', `/api/v1/sandboxes/${victim}/exec`, { command: `echo ${SECRET}-log` }, alice)).status).toBe(200);
      const proc = await u.req('POST', `/api/v1/sandboxes/${victim}/processes`, { command: 'sleep 100000' }, alice);
      expect(proc.status, proc.text).toBe(201);
      const snap = await u.req('POST', `/api/v1/sandboxes/${victim}/snapshot`, { name: `snap-${sc.title.split(' ')[0]}` }, alice);
      const vol = await u.req('POST', '/api/v1/volumes', { name: `vol-${sc.title.split(' ')[0]}` }, alice);
      const secret = { name: SECRET_NAME, value: `${SECRET}-value`, hosts: ['alice.example'] };
      expect((await u.req('POST', '/api/v1/secrets', secret, alice)).status).toBe(201);
      v = {
        sandbox: victim,
        own,
        pid: proc.body.id,
        snapshot: snap.body?.name ?? 'no-snapshot',
        volume: vol.body?.name ?? 'no-volume',
        file: sc.file,
      };
      before = await ownerView();
    });
    afterAll(async () => {
      await u?.close();
      vi.useRealTimers();
      const t = sc.totals;
      // The summary line RELIABILITY.md quotes.
      console.log(`tenant matrix (${sc.title}): ${t.routes} routes, ${t.attempts} attempts, ${t.successes} successes`);
    });

    it('every route is attacked here or named as not sandbox-scoped', () => {
      const keys = routeTable(u.plane.app).map((r) => `${r.method} ${r.url}`);
      const uncovered = keys.filter((k) => !ATTACKS[k] && !NOT_SANDBOX_SCOPED[k] && !k.split(' ')[1]!.startsWith(ADMIN_PREFIX));
      expect(uncovered).toEqual([]);
      // No stale entries: every attack names a route that exists.
      expect(Object.keys(ATTACKS).filter((k) => !keys.includes(k))).toEqual([]);
    });

    for (const [route, attack] of Object.entries(ATTACKS)) {
      it(`${route} as the other tenant`, async () => {
        sc.totals.routes++;
        // Judged against an intact victim: a refusal must not come from an earlier attack's damage.
        expect(await ownerView(), 'the victim as its owner saw it before any attack').toEqual(before);
        for (const a of attack.tries(v)) {
          sc.totals.attempts++;
          const res =
            a.kind === 'sse'
              ? await readStream(u, a, bob)
              : a.kind === 'ws'
                ? await tryWebSocket(u, a, bob)
                : await u.req(a.method, a.url, a.body, { ...bob, ...a.headers });
          try {
            if (sc.poolMode && res.status === 501 && /snapshots and volumes|volumes|snapshot/.test(res.text)) {
              // Pool mode has no snapshots or volumes for anyone (DESIGN §8): the owner gets the same 501.
              expect(res.body.code).toBe(a.url.startsWith('/e2b/') ? 501 : 'not_implemented');
            } else (attack.verdict ?? refused)(res, v);
          } catch (err) {
            sc.totals.successes++;
            throw new Error(`${a.method} ${a.url} answered ${res.status} ${res.text.slice(0, 200)}: ${(err as Error).message}`);
          }
        }
        // Nothing changed for the owner: not the sandbox, its files, its console, its processes.
        const after = await ownerView();
        if (JSON.stringify(after) !== JSON.stringify(before)) sc.totals.successes++;
        expect(after, `${route} changed the victim`).toEqual(before);
      });
    }

    it('admin routes refuse the tenant key', async () => {
      for (const r of routeTable(u.plane.app).filter((e) => e.url.startsWith(ADMIN_PREFIX))) {
        const res = await u.req(r.method, r.url.replace(/:[A-Za-z]+/g, 'alice'), r.method === 'GET' ? undefined : {}, bob);
        expect([401, 403], `${r.method} ${r.url}`).toContain(res.status);
      }
    });

    it('afterwards the owner finds everything as it was', async () => {
      const after = await ownerView();
      expect(after.sandbox).toEqual(before.sandbox);
      expect(after.files).toEqual(before.files);
      expect(after.logs).toBe(before.logs);
      expect(after.processes).toEqual(before.processes);
      const file = await u.req('GET', `${sb(v)}/files?path=${v.file}`, undefined, alice);
      expect(file.text).toBe(SECRET);
      expect((await u.req('GET', `${sb(v)}/files/stat?path=/workspace/pwned`, undefined, alice)).status).toBe(404);
      if (!sc.poolMode) {
        expect((await u.req('GET', `/api/v1/snapshots/${v.snapshot}`, undefined, alice)).status).toBe(200);
        expect((await u.req('GET', '/api/v1/volumes', undefined, alice)).text).toContain(v.volume);
      }
    });

    it('the owner is not refused the same routes (the matrix can fail)', async () => {
      expect((await u.req('GET', sb(v), undefined, alice)).status).toBe(200);
      expect((await u.req('GET', `${sb(v)}/files?path=${v.file}`, undefined, alice)).text).toBe(SECRET);
      expect((await u.req('GET', `${sb(v)}/processes/${v.pid}`, undefined, alice)).status).toBe(200);
      const events = await readStream(
        u,
        { kind: 'sse', method: 'GET', url: `/api/v1/events?sandbox_id=${v.sandbox}`, headers: { 'last-event-id': '0' } },
        alice,
      );
      expect(events.text).toContain(v.sandbox);
    });
  });
}
