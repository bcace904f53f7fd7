/**
 * The attacks of the tenant matrix (tenant-matrix.test.ts): for each route of the app, what the
 * other tenant tries and what it may answer; and the routes that hold nothing of a tenant.
 */
import { expect } from 'vitest';
import type { UnitRes } from '../../helpers/unit-plane.js';

export const API_KEY = 'matrix-user-key-1f3e5d7c9b1a3f5e7d9c';
export const ADMIN_KEY = 'matrix-admin-key-2a4c6e8f0b2d4f6a8c0e';
export const SECRET = 'alice-secret-7d41c0';
/** The victim's stored secret (DESIGN.md §15): its name; its value holds SECRET. */
export const SECRET_NAME = 'ALICE_SECRET_TOKEN';

/**
 * Routes that hold nothing of one tenant that another could reach, and why. The quota routes are
 * the spec's (4.4) user-realm administration: any holder of the API key may read and set any
 * owner's quota, in pool mode too — a decision for the spec, not a sandbox-scoped leak.
 */
export const NOT_SANDBOX_SCOPED: Record<string, string> = {
  'GET /api/v1/live': 'probe',
  'GET /api/v1/health': 'probe',
  'GET /api/v1/ready': 'probe',
  'GET /api/v1/pool/status': 'counts only, no ids',
  'POST /api/v1/sandboxes/admission': 'asks whether a spawn would be admitted, for the caller only',
  'POST /api/v1/templates': 'templates are server-wide definitions, not tenant data',
  'GET /api/v1/templates': 'templates are server-wide definitions',
  'GET /api/v1/templates/:name': 'templates are server-wide definitions',
  'PUT /api/v1/templates/:name': 'templates are server-wide definitions',
  'DELETE /api/v1/templates/:name': 'templates are server-wide definitions',
  'POST /api/v1/templates/:name/spawn': "spawns a sandbox of the caller's own",
  'GET /api/v1/quotas': 'quota administration (spec 4.4, user realm)',
  'GET /api/v1/quotas/summary': 'quota administration (spec 4.4, user realm)',
  'GET /api/v1/quotas/:ownerID': 'quota administration (spec 4.4, user realm)',
  'PUT /api/v1/quotas/:ownerID': 'quota administration (spec 4.4, user realm)',
  'GET /api/v1/quotas/:ownerID/usage': 'quota administration (spec 4.4, user realm)',
  'DELETE /api/v1/quotas/:ownerID': 'quota administration (spec 4.4, user realm)',
  'GET /api/v1/providers': 'server configuration',
  'GET /api/v1/providers/:name': 'server configuration',
  'POST /api/v1/providers/test': 'server configuration',
  'GET /api/v1/workers': 'server topology',
  'GET /api/v1/workers/:workerID': 'server topology',
  'GET /api/v1/diagnostics': 'server health',
  'GET /api/v1/metrics': 'aggregate counters',
  'GET /api/v1/metrics/prometheus': 'aggregate counters',
  'GET /api/v1/openapi.json': 'the API description',
  'POST /api/v1/worker/:workerID/heartbeat': 'worker credentials only',
  'POST /api/v1/worker/events': 'worker credentials only',
  'GET /api/v1/worker/sandboxes/:id/secrets': 'worker credentials only (the placing worker, its lease)',
  'POST /api/v1/worker/:workerID/leases/:resourceID/renew': 'worker credentials only',
  'GET /ui': 'static dashboard assets',
  'GET /ui/*': 'static dashboard assets',
  'GET /mcp': 'MCP session stream (no tenant data without a session)',
  'DELETE /mcp': 'ends an MCP session of the caller',
  'POST /e2b/sandboxes': "E2B create: spawns a sandbox of the caller's own",
  'POST /e2b/v2/sandboxes': "E2B create: spawns a sandbox of the caller's own",
  ...Object.fromEntries(
    ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'QUERY'].map((m) => [
      `${m} /e2b/volumecontent/*`,
      'E2B volume content: not served (501 for every call)',
    ]),
  ),
};
export const ADMIN_PREFIX = '/api/v1/admin/';

export interface Victim {
  sandbox: string;
  /** The attacker's own sandbox (for cross-sandbox ids). */
  own: string;
  pid: string;
  snapshot: string;
  volume: string;
  /** The path of the secret file as the API shows it to its owner. */
  file: string;
}
export interface Attempt {
  /** `ws`: a WebSocket upgrade through `injectWS`, then an exec start message. */
  kind?: 'ws' | 'sse';
  method: string;
  url: string;
  body?: unknown;
  headers?: Record<string, string>;
}
/** What an attempt may answer: 404 `not_found` unless a route says otherwise. */
export type Verdict = (res: UnitRes, v: Victim) => void;

export const refused: Verdict = (res) => {
  expect(res.status).toBe(404);
  expect(res.body.code).toBe('not_found');
  expect(res.text).not.toContain(SECRET);
};
/** E2B's not-found, as its SDK reads it: 404 with `{code: 404, message}`. */
const e2bRefused: Verdict = (res) => {
  expect(res.status).toBe(404);
  expect(res.body.code).toBe(404);
  expect(res.text).not.toContain(SECRET);
};
/**
 * E2B's envd plane (DESIGN.md §14): the victim's sandbox has no envd access token here (made
 * through the native API), so every call is refused before anything is read — 401 (405 for a
 * method `/files` does not serve), in E2B's or Connect's shape, never the victim's data.
 */
const envdRefused: Verdict = (res) => {
  // A Connect stream answers 200 and carries its error in the end-of-stream message.
  if (res.status === 200) expect(res.text).toContain('"code":"unauthenticated"');
  else expect([401, 405]).toContain(res.status);
  expect(res.text).not.toContain(SECRET);
};
const envd = (v: Victim, method: string, path: string, body?: unknown): Attempt => ({
  method,
  url: `/e2b/sandbox${path}`,
  headers: {
    'e2b-sandbox-id': v.sandbox,
    'connect-protocol-version': '1',
    ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
  },
  ...(body !== undefined ? { body } : {}),
});
/** A Connect server-streaming call: the request in one enveloped JSON message (short enough for a one-byte length). */
const envdStream = (v: Victim, path: string, message: unknown): Attempt => {
  const json = JSON.stringify(message);
  if (json.length > 127) throw new Error('envelope too long for this helper');
  return {
    method: 'POST',
    url: `/e2b/sandbox${path}`,
    headers: { 'e2b-sandbox-id': v.sandbox, 'content-type': 'application/connect+json' },
    body: `\u0000\u0000\u0000\u0000${String.fromCharCode(json.length)}${json}`,
  };
};
/** A list answers 200 but holds nothing of the victim. */
const listsNothing =
  (pick: (v: Victim) => string): Verdict =>
  (res, v) => {
    expect(res.status).toBe(200);
    expect(res.text).not.toContain(pick(v));
  };

/**
 * Another owner's secret: not found in the caller's namespace, forbidden through ?owner_id= without
 * an admin credential. A 200 may only be the attacker's own secret of the same name (its POST made
 * one); the owner's view, checked after every attack, shows the victim's untouched.
 */
const secretRefused: Verdict = (res) => {
  expect([200, 403, 404]).toContain(res.status);
  expect(res.text).not.toContain('"owner_id":"alice"');
  expect(res.text).not.toContain(SECRET);
};
const secretTries = (method: string, body?: unknown): Attempt[] => [
  { method, url: `/api/v1/secrets/${SECRET_NAME}`, ...(body !== undefined ? { body } : {}) },
  { method, url: `/api/v1/secrets/${SECRET_NAME}?owner_id=alice`, ...(body !== undefined ? { body } : {}) },
];

export const sb = (v: Victim) => `/api/v1/sandboxes/${v.sandbox}`;
export const ATTACKS: Record<string, { tries: (v: Victim) => Attempt[]; verdict?: Verdict }> = {
  'GET /api/v1/sandboxes': { tries: () => [{ method: 'GET', url: '/api/v1/sandboxes' }], verdict: listsNothing((v) => v.sandbox) },
  'POST /api/v1/sandboxes': {
    // Spawning from the victim's snapshot or with the victim's volume is reaching them.
    tries: (v) => [
      { method: 'POST', url: '/api/v1/sandboxes', body: { snapshot: v.snapshot } },
      { method: 'POST', url: '/api/v1/sandboxes', body: { volumes: [{ name: v.volume, mount_path: '/data' }] } },
    ],
  },
  'DELETE /api/v1/sandboxes': {
    // The bulk prune removes the caller's own sandboxes only; the victim's survives (checked after).
    tries: () => [{ method: 'DELETE', url: '/api/v1/sandboxes' }],
    verdict: (res) => expect(res.status).toBe(200),
  },
  'GET /api/v1/sandboxes/:id': { tries: (v) => [{ method: 'GET', url: sb(v) }] },
  'DELETE /api/v1/sandboxes/:id': { tries: (v) => [{ method: 'DELETE', url: sb(v) }] },
  'POST /api/v1/sandboxes/:id/extend': { tries: (v) => [{ method: 'POST', url: `${sb(v)}/extend`, body: { ttl: '2h' } }] },
  'POST /api/v1/sandboxes/:id/pause': { tries: (v) => [{ method: 'POST', url: `${sb(v)}/pause` }] },
  'POST /api/v1/sandboxes/:id/resume': { tries: (v) => [{ method: 'POST', url: `${sb(v)}/resume` }] },
  'PUT /api/v1/sandboxes/:id/egress': { tries: (v) => [{ method: 'PUT', url: `${sb(v)}/egress`, body: { allow: ['example.com'] } }] },
  'GET /api/v1/sandboxes/:id/logs': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/logs` }] },
  'POST /api/v1/sandboxes/:id/exec': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/exec`, body: { command: 'echo pwned > /workspace/pwned' } },
      { method: 'POST', url: `${sb(v)}/exec`, body: { command: 'cat', args: [v.file], mode: 'argv', stream: true } },
    ],
  },
  'GET /api/v1/sandboxes/:id/exec/ws': {
    tries: (v) => [
      { kind: 'ws', method: 'GET', url: `${sb(v)}/exec/ws`, body: { type: 'start', command: 'cat', args: [v.file], mode: 'argv' } },
      { kind: 'ws', method: 'GET', url: `${sb(v)}/exec/ws`, body: { type: 'start', command: 'echo pwned > /workspace/pwned' } },
    ],
    verdict: (res) => {
      // Refused before the upgrade (404), or an error message and no output after it.
      expect(res.status === 404 || /"code":"not_found"/.test(res.text), res.text).toBe(true);
      expect(res.text).not.toMatch(/"type":"(stdout|exit)"/);
      expect(res.text).not.toContain(SECRET);
    },
  },
  'POST /api/v1/sandboxes/:id/processes': {
    tries: (v) => [{ method: 'POST', url: `${sb(v)}/processes`, body: { command: 'echo pwned > /workspace/pwned' } }],
  },
  'GET /api/v1/sandboxes/:id/processes': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/processes` }] },
  'GET /api/v1/sandboxes/:id/processes/:pid': {
    tries: (v) => [
      { method: 'GET', url: `${sb(v)}/processes/${v.pid}` },
      { method: 'GET', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}` },
    ],
  },
  'GET /api/v1/sandboxes/:id/processes/:pid/output': {
    tries: (v) => [
      { method: 'GET', url: `${sb(v)}/processes/${v.pid}/output` },
      { method: 'GET', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}/output` },
    ],
  },
  'POST /api/v1/sandboxes/:id/processes/:pid/signal': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/processes/${v.pid}/signal`, body: { signal: 'SIGKILL' } },
      { method: 'POST', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}/signal`, body: { signal: 'SIGKILL' } },
    ],
  },
  'POST /api/v1/sandboxes/:id/processes/:pid/stdin': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/processes/${v.pid}/stdin`, body: { data: 'x' } },
      { method: 'POST', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}/stdin`, body: { data: 'x' } },
    ],
  },
  'POST /api/v1/sandboxes/:id/processes/:pid/stdin/close': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/processes/${v.pid}/stdin/close` },
      { method: 'POST', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}/stdin/close` },
    ],
  },
  'POST /api/v1/sandboxes/:id/processes/:pid/resize': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/processes/${v.pid}/resize`, body: { cols: 80, rows: 24 } },
      { method: 'POST', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}/resize`, body: { cols: 80, rows: 24 } },
    ],
  },
  'GET /e2b/sandbox/*': {
    tries: (v) => [envd(v, 'GET', `/files?path=${encodeURIComponent(v.file)}`), envd(v, 'GET', '/files?path=x&signature=v1_x')],
    verdict: envdRefused,
  },
  'POST /e2b/sandbox/*': {
    tries: (v) => [
      envdStream(v, '/process.Process/Start', { process: { cmd: '/bin/sh', args: ['-c', `cat ${v.file}`] } }),
      envdStream(v, '/filesystem.Filesystem/WatchDir', { path: '/' }),
      envd(v, 'POST', '/process.Process/List', {}),
      envd(v, 'POST', '/filesystem.Filesystem/ListDir', { path: '/', depth: 2 }),
      envd(v, 'POST', '/filesystem.Filesystem/Remove', { path: v.file }),
      envd(v, 'POST', `/files?path=${encodeURIComponent(v.file)}`),
    ],
    verdict: envdRefused,
  },
  ...Object.fromEntries(
    ['PUT', 'PATCH', 'DELETE'].map((m) => [
      `${m} /e2b/sandbox/*`,
      { tries: (v: Victim) => [envd(v, m, '/files?path=x')], verdict: envdRefused },
    ]),
  ),
  'DELETE /api/v1/sandboxes/:id/processes/:pid': {
    tries: (v) => [
      { method: 'DELETE', url: `${sb(v)}/processes/${v.pid}` },
      { method: 'DELETE', url: `/api/v1/sandboxes/${v.own}/processes/${v.pid}` },
    ],
  },
  'GET /api/v1/sandboxes/:id/files': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/files?path=${v.file}` }] },
  'POST /api/v1/sandboxes/:id/files': {
    tries: (v) => [
      { method: 'POST', url: `${sb(v)}/files`, body: { path: v.file, content: 'overwritten' } },
      { method: 'POST', url: `${sb(v)}/files?path=${v.file}`, body: 'raw', headers: { 'content-type': 'application/octet-stream' } },
    ],
  },
  'DELETE /api/v1/sandboxes/:id/files': { tries: (v) => [{ method: 'DELETE', url: `${sb(v)}/files?path=${v.file}` }] },
  // A watch that were let through would stream; refused, it answers at once as if the sandbox were not there.
  'GET /api/v1/sandboxes/:id/files/watch': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/files/watch?path=/` }] },
  'GET /api/v1/sandboxes/:id/files/list': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/files/list?path=/` }] },
  'POST /api/v1/sandboxes/:id/files/move': {
    tries: (v) => [{ method: 'POST', url: `${sb(v)}/files/move`, body: { old_path: v.file, new_path: `${v.file}.moved` } }],
  },
  'POST /api/v1/sandboxes/:id/files/chmod': {
    tries: (v) => [{ method: 'POST', url: `${sb(v)}/files/chmod`, body: { path: v.file, mode: '0777' } }],
  },
  'GET /api/v1/sandboxes/:id/files/stat': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/files/stat?path=${v.file}` }] },
  'GET /api/v1/sandboxes/:id/files/glob': { tries: (v) => [{ method: 'GET', url: `${sb(v)}/files/glob?pattern=/**` }] },
  'POST /api/v1/sandboxes/:id/fork': { tries: (v) => [{ method: 'POST', url: `${sb(v)}/fork`, body: { count: 1 } }] },
  'POST /api/v1/sandboxes/:id/snapshot': { tries: (v) => [{ method: 'POST', url: `${sb(v)}/snapshot`, body: { name: 'stolen' } }] },
  'GET /api/v1/snapshots': { tries: () => [{ method: 'GET', url: '/api/v1/snapshots' }], verdict: listsNothing((v) => v.snapshot) },
  'GET /api/v1/snapshots/:name': { tries: (v) => [{ method: 'GET', url: `/api/v1/snapshots/${v.snapshot}` }] },
  'DELETE /api/v1/snapshots/:name': { tries: (v) => [{ method: 'DELETE', url: `/api/v1/snapshots/${v.snapshot}` }] },
  'POST /api/v1/volumes': {
    // Creating a volume of the victim's name must not hand it over (nor answer that it exists).
    tries: (v) => [{ method: 'POST', url: '/api/v1/volumes', body: { name: v.volume } }],
    verdict: (res) => expect([201, 404, 409]).toContain(res.status),
  },
  'GET /api/v1/volumes': { tries: () => [{ method: 'GET', url: '/api/v1/volumes' }], verdict: listsNothing((v) => v.volume) },
  'DELETE /api/v1/volumes/:name': { tries: (v) => [{ method: 'DELETE', url: `/api/v1/volumes/${v.volume}` }] },
  // Secrets (DESIGN.md §15): one namespace per owner; the same name in the attacker's is the attacker's own.
  'POST /api/v1/secrets': {
    tries: () => [
      { method: 'POST', url: '/api/v1/secrets', body: { name: SECRET_NAME, value: 'attacker', hosts: ['evil.test'] } },
      { method: 'POST', url: '/api/v1/secrets?owner_id=alice', body: { name: 'PLANTED', value: 'attacker', hosts: ['evil.test'] } },
    ],
    verdict: (res) => expect([201, 403, 409]).toContain(res.status),
  },
  'GET /api/v1/secrets': {
    tries: () => [
      { method: 'GET', url: '/api/v1/secrets' },
      { method: 'GET', url: '/api/v1/secrets?owner_id=alice' },
    ],
    verdict: (res) => {
      expect([200, 403]).toContain(res.status);
      expect(res.text).not.toContain('"owner_id":"alice"');
    },
  },
  'GET /api/v1/secrets/:name': { tries: () => secretTries('GET'), verdict: secretRefused },
  'PUT /api/v1/secrets/:name': { tries: () => secretTries('PUT', { hosts: ['evil.test'] }), verdict: secretRefused },
  'DELETE /api/v1/secrets/:name': { tries: () => secretTries('DELETE'), verdict: secretRefused },
  'GET /api/v1/events': {
    tries: (v) => [
      { kind: 'sse', method: 'GET', url: `/api/v1/events?sandbox_id=${v.sandbox}`, headers: { 'last-event-id': '0' } },
      { kind: 'sse', method: 'GET', url: '/api/v1/events', headers: { 'last-event-id': '0' } },
    ],
    verdict: (res, v) => {
      expect([200, 404]).toContain(res.status);
      expect(res.text).not.toContain(v.sandbox);
    },
  },
  // The E2B-compatible API (DESIGN §14): the same owners, answered in E2B's shape {code: 404, message}.
  'GET /e2b/sandboxes': { tries: () => [{ method: 'GET', url: '/e2b/sandboxes' }], verdict: listsNothing((v) => v.sandbox) },
  'GET /e2b/v2/sandboxes': { tries: () => [{ method: 'GET', url: '/e2b/v2/sandboxes' }], verdict: listsNothing((v) => v.sandbox) },
  ...Object.fromEntries(
    (
      [
        ['GET', ''],
        ['DELETE', ''],
        ['GET', '/metrics'],
        ['POST', '/timeout', { timeout: 7200 }],
        ['POST', '/refreshes', { duration: 3600 }],
        ['POST', '/connect', { timeout: 7200 }],
        ['POST', '/pause'],
        ['POST', '/resume', { timeout: 7200 }],
      ] as const
    ).map(([method, suffix, body]) => [
      `${method} /e2b/sandboxes/:sandboxID${suffix}`,
      { tries: (v: Victim) => [{ method, url: `/e2b/sandboxes/${v.sandbox}${suffix}`, body }], verdict: e2bRefused },
    ]),
  ),
  'POST /e2b/v2/sandboxes/:sandboxID/connect': {
    tries: (v) => [{ method: 'POST', url: `/e2b/v2/sandboxes/${v.sandbox}/connect`, body: { timeout: 7200 } }],
    verdict: e2bRefused,
  },
  // E2B's snapshots, volumes, network and secrets over sbx's (the same visibility, E2B's shapes).
  'POST /e2b/sandboxes/:sandboxID/snapshots': {
    tries: (v) => [{ method: 'POST', url: `/e2b/sandboxes/${v.sandbox}/snapshots`, body: { name: 'stolen-e2b' } }],
    verdict: e2bRefused,
  },
  'PUT /e2b/sandboxes/:sandboxID/network': {
    tries: (v) => [
      { method: 'PUT', url: `/e2b/sandboxes/${v.sandbox}/network`, body: { denyOut: ['0.0.0.0/0'], allowOut: ['evil.test'] } },
    ],
    verdict: e2bRefused,
  },
  'GET /e2b/snapshots': {
    tries: (v) => [
      { method: 'GET', url: '/e2b/snapshots' },
      { method: 'GET', url: `/e2b/snapshots?sandboxID=${v.sandbox}` },
      { method: 'GET', url: `/e2b/snapshots?name=${v.snapshot}` },
    ],
    verdict: listsNothing((v) => v.snapshot),
  },
  'DELETE /e2b/templates/:templateID': { tries: (v) => [{ method: 'DELETE', url: `/e2b/templates/${v.snapshot}` }], verdict: e2bRefused },
  'POST /e2b/volumes': {
    tries: (v) => [{ method: 'POST', url: '/e2b/volumes', body: { name: v.volume } }],
    verdict: (res) => expect([201, 404, 409]).toContain(res.status),
  },
  'GET /e2b/volumes': { tries: () => [{ method: 'GET', url: '/e2b/volumes' }], verdict: listsNothing((v) => v.volume) },
  'GET /e2b/volumes/:volumeID': { tries: (v) => [{ method: 'GET', url: `/e2b/volumes/${v.volume}` }], verdict: e2bRefused },
  'DELETE /e2b/volumes/:volumeID': { tries: (v) => [{ method: 'DELETE', url: `/e2b/volumes/${v.volume}` }], verdict: e2bRefused },
  'POST /e2b/secrets': {
    tries: () => [
      { method: 'POST', url: '/e2b/secrets', body: { name: SECRET_NAME, value: 'attacker', metadata: { hosts: 'evil.test' } } },
    ],
    verdict: (res) => expect([201, 409]).toContain(res.status),
  },
  'GET /e2b/secrets': {
    tries: () => [{ method: 'GET', url: '/e2b/secrets' }],
    verdict: (res) => {
      expect(res.status).toBe(200);
      expect(res.text).not.toContain('alice');
      expect(res.text).not.toContain(SECRET);
    },
  },
  ...Object.fromEntries(
    (
      [
        ['GET', undefined],
        ['POST', { value: 'attacker', metadata: { hosts: 'evil.test' } }],
        ['DELETE', undefined],
      ] as const
    ).map(([method, body]) => [
      `${method} /e2b/secrets/:secretID`,
      {
        tries: () => [{ method, url: `/e2b/secrets/${SECRET_NAME}`, ...(body ? { body } : {}) }],
        // 204: the attacker's own secret of that name (its POST made one); the victim's is checked intact after.
        verdict: ((res, v) => (res.status === 204 ? expect(res.text).toBe('') : secretRefused(res, v))) as Verdict,
      },
    ]),
  ),
  'POST /mcp': {
    // Every MCP tool that takes a sandbox or process, called as the other tenant.
    tries: (v) =>
      (
        [
          ['read_file', { sandbox_id: v.sandbox, path: v.file }],
          ['write_file', { sandbox_id: v.sandbox, path: v.file, content: 'overwritten' }],
          ['list_files', { sandbox_id: v.sandbox, path: '/' }],
          ['exec', { sandbox_id: v.sandbox, command: 'echo pwned > /workspace/pwned' }],
          ['logs', { sandbox_id: v.sandbox }],
          ['destroy', { sandbox_id: v.sandbox }],
          ['preview_url', { sandbox_id: v.sandbox, port: 8080 }],
          ['start_process', { sandbox_id: v.sandbox, command: 'echo pwned > /workspace/pwned' }],
          ['process_output', { sandbox_id: v.sandbox, process_id: v.pid }],
          ['stop_process', { sandbox_id: v.sandbox, process_id: v.pid }],
          ['list_sandboxes', {}],
        ] as const
      ).map(([name, args], i) => ({
        method: 'POST',
        url: '/mcp',
        headers: { accept: 'application/json, text/event-stream' },
        body: { jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name, arguments: args } },
      })),
    verdict: (res, v) => {
      expect(res.status).toBe(200);
      const result = res.body.result as { isError?: boolean; content: Array<{ text: string }> };
      expect(res.body.error).toBeUndefined();
      const text = result.content.map((c) => c.text).join('');
      expect(text).not.toContain(SECRET);
      if (text.startsWith('[') || text.includes('"sandboxes"')) expect(text).not.toContain(v.sandbox);
      else {
        expect(result.isError, text).toBe(true);
        expect(text).toContain('not_found');
      }
    },
  },
};
