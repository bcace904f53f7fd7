import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runServe } from '../../src/transports/cli/commands/serve.js';

const KEY = 'serve-user-key-0123456789abcdef0123456789';
const ADMIN = 'serve-admin-key-0123456789abcdef012345678';

interface Running {
  url: string;
  /** The JSON log lines `serve` wrote so far (the process logger writes to stderr). */
  lines(): Array<{ level: number; msg: string }>;
  stop(): Promise<number>;
}

/**
 * `sbx serve` in this process (mock provider, temp home), its log captured from process.stderr
 * (where the process logger writes) while it runs. Stopped through its abort signal.
 */
async function serve(home: string, env: Record<string, string>): Promise<Running> {
  const ac = new AbortController();
  let log = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    log += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    done?.();
    return true;
  }) as typeof process.stderr.write;
  const restore = () => (process.stderr.write = write);
  let listening!: (url: string) => void;
  const url = new Promise<string>((resolve) => (listening = resolve));
  const done = runServe({
    port: 0,
    host: '127.0.0.1',
    signal: ac.signal,
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    cwd: home,
    home,
    env: {
      HOME: home,
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(home, 'mock'),
      SVC_LOGGING_FORMAT: 'json',
      SVC_LOGGING_LEVEL: 'info',
      ...env,
    },
    onListening: (u) => listening(u),
  });
  const first = await Promise.race([url, done.then((code) => `exit ${code}`)]);
  if (!first.startsWith('http')) {
    restore();
    throw new Error(`serve did not start (${first}):\n${log}`);
  }
  return {
    url: first,
    lines: () =>
      log
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string }),
    async stop() {
      ac.abort();
      try {
        return await done;
      } finally {
        restore();
      }
    },
  };
}

const get = (base: string, path: string, headers: Record<string, string> = {}) => fetch(base + path, { headers }).then((r) => r.status);

describe('sbx serve: a configured key switches auth on (DESIGN §3 "Auth")', () => {
  let home: string;
  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'sbx-auth-serve-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('SVC_AUTH_API_KEY alone: every API route needs the key, and the start says why', async () => {
    const s = await serve(home, { SVC_AUTH_API_KEY: KEY });
    try {
      expect(await get(s.url, '/api/v1/sandboxes')).toBe(401);
      expect(await get(s.url, '/api/v1/sandboxes', { 'x-api-key': KEY })).toBe(200);
      expect(await get(s.url, '/api/v1/live')).toBe(200);
      // Auth on: the dev-box guard is off, the spec's CORS rules (default "*") stand alone.
      expect(await get(s.url, '/api/v1/sandboxes', { 'x-api-key': KEY, origin: 'https://elsewhere.example' })).toBe(200);
      const info = s
        .lines()
        .filter((l) => l.level === 30)
        .map((l) => l.msg);
      expect(info).toContain(
        'auth on: auth.api_key is set (from SVC_AUTH_API_KEY) and auth.enabled is unset, so every API route needs X-API-Key',
      );
      expect(info.some((m) => m.startsWith('auth off'))).toBe(false);
      expect(JSON.stringify(s.lines())).not.toContain(KEY);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });

  it('an admin key alone starts cleanly and protects only the admin routes; the guard stays on', async () => {
    const s = await serve(home, { SVC_AUTH_ADMIN_API_KEY: ADMIN });
    try {
      expect(await get(s.url, '/api/v1/sandboxes')).toBe(200);
      expect(await get(s.url, '/api/v1/admin/providers')).toBe(401);
      expect(await get(s.url, '/api/v1/admin/providers', { 'x-admin-api-key': ADMIN })).toBe(200);
      expect(await get(s.url, '/api/v1/sandboxes', { origin: 'http://evil.example' })).toBe(403);
      const start = s.lines().find((l) => l.msg.startsWith('auth off'));
      const parts = [
        /^auth off except the admin routes \(auth\.admin_api_key\); /,
        /dev-box guard on: browser origins limited to localhost, 127\.0\.0\.0\/8, \[::1\], the server's own origin; /,
        /Host limited to IP addresses, localhost, /,
      ];
      expect(start?.msg).toMatch(new RegExp(parts.map((p) => p.source).join('')));
      expect(JSON.stringify(s.lines())).not.toContain(ADMIN);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });

  it('an explicit auth.enabled=false beside a key keeps the server open and warns at start', async () => {
    const s = await serve(home, { SVC_AUTH_API_KEY: KEY, SVC_AUTH_ENABLED: 'false' });
    try {
      expect(await get(s.url, '/api/v1/sandboxes')).toBe(200);
      const warns = s
        .lines()
        .filter((l) => l.level === 40)
        .map((l) => l.msg);
      expect(warns).toContain(
        'auth.enabled is false (from SVC_AUTH_ENABLED) although auth.api_key is set (from SVC_AUTH_API_KEY): ' +
          'the key is ignored and the API is open; remove auth.enabled: false to turn auth on',
      );
      expect(s.lines().some((l) => l.msg.startsWith('auth off; dev-box guard on:'))).toBe(true);
      expect(JSON.stringify(s.lines())).not.toContain(KEY);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });
});
