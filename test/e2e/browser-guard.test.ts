/**
 * The dev-box guard against a real browser (DESIGN.md §3): Debian Chromium driven by playwright-core,
 * pages served from another origin (`evil.test`, mapped to 127.0.0.1) try to drive an open server
 * (auth off, mock provider: a command that ran would be code execution on this machine). What is
 * asserted is what the server did — its request counters, its sandboxes, a marker file — not only
 * that the page's fetch failed.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const CHROMIUM = process.env.SBX_TEST_CHROMIUM ?? '/usr/bin/chromium';
const REQUIRED = process.env.SBX_TEST_BROWSER === '1';
/** Skipped (with this reason) where Chromium is absent, unless SBX_TEST_BROWSER=1 makes it mandatory. */
const SKIP =
  existsSync(CHROMIUM) || REQUIRED
    ? undefined
    : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set SBX_TEST_CHROMIUM; SBX_TEST_BROWSER=1 makes this suite mandatory)`;

const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--host-resolver-rules=MAP evil.test 127.0.0.1',
];

/** `sbx_http_requests_total` summed by `METHOD status`, from the server's own Prometheus text. */
async function answered(api: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${api}/api/v1/metrics/prometheus`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^sbx_http_requests_total\{([^}]*)\} (\d+)/.exec(line);
    if (!m) continue;
    const method = /method="([^"]+)"/.exec(m[1]!)?.[1];
    const status = /status_code="(\d+)"/.exec(m[1]!)?.[1];
    const key = `${method} ${status}`;
    out.set(key, (out.get(key) ?? 0) + Number(m[2]));
  }
  return out;
}

const delta = (after: Map<string, number>, before: Map<string, number>, key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);

/** What each attack saw in the page; the server side is checked separately. */
interface PageSide {
  jsonFetch: string;
  noCors: string;
  form: string;
  ws: string;
}

/** Runs the four attacks from the current page against `api`, aiming the commands at `marker`. */
function attack(page: Page, api: string, id: string, marker: string): Promise<PageSide> {
  return page.evaluate(
    async ({ api, id, marker }) => {
      // This runs in the page; the test program is typed without the DOM library.
      const document = (globalThis as any).document;
      const settle = <T>(p: Promise<T>, ms: number, late: T) => Promise.race([p, new Promise<T>((r) => setTimeout(() => r(late), ms))]);
      const jsonFetch = await fetch(`${api}/api/v1/sandboxes/${id}/exec`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ command: `touch ${marker}` }),
      }).then(
        (r) => `status ${r.status}`,
        (e: Error) => `rejected ${e.name}`,
      );
      const noCors = await fetch(`${api}/api/v1/sandboxes`, { method: 'POST', mode: 'no-cors' }).then(
        (r) => `opaque ${r.type}`,
        (e: Error) => `rejected ${e.name}`,
      );
      const form = await settle(
        new Promise<string>((resolve) => {
          const frame = document.createElement('iframe');
          frame.name = 'sink';
          document.body.appendChild(frame);
          // Set after the append: the frame's initial about:blank load is not the form's answer.
          frame.onload = () => resolve('loaded');
          const f = document.createElement('form');
          f.method = 'POST';
          f.action = `${api}/api/v1/sandboxes/${id}/exec`;
          f.enctype = 'text/plain';
          f.target = 'sink';
          const input = document.createElement('input');
          input.name = `{"command":"touch ${marker}","x":"`;
          input.value = '"}';
          f.appendChild(input);
          document.body.appendChild(f);
          f.submit();
        }),
        10_000,
        'no load',
      );
      const ws = await settle(
        new Promise<string>((resolve) => {
          const sock = new WebSocket(`${api.replace(/^http/, 'ws')}/api/v1/sandboxes/${id}/exec/ws`);
          sock.onopen = () => sock.send(JSON.stringify({ type: 'start', command: `touch ${marker}` }));
          sock.onmessage = (m) => {
            const msg = JSON.parse(String(m.data)) as { type: string };
            if (msg.type === 'exit') resolve('ran');
          };
          sock.onerror = () => resolve('error');
        }),
        10_000,
        'no answer',
      );
      return { jsonFetch, noCors, form, ws };
    },
    { api, id, marker },
  );
}

describe.skipIf(SKIP !== undefined)(`dev-box guard in Chromium${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  let srv: TestServer;
  let pages: Server;
  let pagePort: number;
  let profile: string;
  let browser: BrowserContext;
  let api: string;
  let id: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`SBX_TEST_BROWSER=1 but there is no Chromium at ${CHROMIUM} (apt-get install chromium)`);
    srv = await startTestServer();
    api = srv.url;
    const spawned = await fetch(`${api}/api/v1/sandboxes`, { method: 'POST' });
    expect(spawned.status).toBe(201);
    id = ((await spawned.json()) as { id: string }).id;
    pages = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>page</title><body><p>a page</p></body>');
    });
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    pagePort = (pages.address() as { port: number }).port;
    profile = mkdtempSync(join(tmpdir(), 'sbx-chromium-'));
    browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, timeout: 60_000 });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await new Promise<void>((resolve) => (pages ? pages.close(() => resolve()) : resolve()));
    await srv?.close();
  });

  const sandboxCount = async () => ((await (await fetch(`${api}/api/v1/sandboxes`)).json()) as unknown[]).length;

  it('a page on another origin can neither spawn nor run a command: each attempt is answered 403', async () => {
    const marker = join(srv.dir, 'pwned-by-evil');
    const page = await browser.newPage();
    try {
      await page.goto(`http://evil.test:${pagePort}/`);
      expect(await page.evaluate(() => (globalThis as any).location.origin)).toBe(`http://evil.test:${pagePort}`);
      const before = await answered(api);
      const count = await sandboxCount();
      const seen = await attack(page, api, id, marker);

      // The page side: the CORS fetch fails, the others are blind (that alone proves nothing).
      expect(seen.jsonFetch).toBe('rejected TypeError');
      expect(seen.ws).toBe('error');

      // The server side: every request was refused by the guard, before any route ran. The form's
      // navigation may still be in flight when the page side settles: wait for the count (bounded).
      let after = await answered(api);
      for (const deadline = Date.now() + 10_000; delta(after, before, 'POST 403') < 2 && Date.now() < deadline; ) {
        await new Promise((r) => setTimeout(r, 100));
        after = await answered(api);
      }
      expect(delta(after, before, 'OPTIONS 403')).toBe(1); // the JSON fetch's preflight
      expect(delta(after, before, 'POST 403')).toBe(2); // the no-cors POST and the form POST
      expect(delta(after, before, 'GET 403')).toBe(1); // the WebSocket upgrade
      for (const ok of ['POST 200', 'POST 201', 'GET 101']) expect(delta(after, before, ok), ok).toBe(0);
      expect(await sandboxCount()).toBe(count);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await page.close();
    }
  });

  it('a rebinding name (evil.test resolving to this machine) gets 403 for its Host, even same-origin', async () => {
    const port = new URL(api).port;
    const marker = join(srv.dir, 'pwned-by-rebinding');
    const page = await browser.newPage();
    try {
      // After a rebinding the attacker's page and the API share the name, so its requests are same-origin.
      const rebound = `http://evil.test:${port}`;
      const res = await page.goto(`${rebound}/api/v1/sandboxes`);
      expect(res?.status()).toBe(403);
      const before = await answered(api);
      const seen = await page.evaluate(
        async ({ rebound, id, marker }) => {
          const r = await fetch(`${rebound}/api/v1/sandboxes/${id}/exec`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ command: `touch ${marker}` }),
          });
          return { status: r.status, body: (await r.json()) as { code: string; message: string } };
        },
        { rebound, id, marker },
      );
      expect(seen.status).toBe(403);
      expect(seen.body.code).toBe('forbidden');
      expect(seen.body.message).toMatch(/DNS rebinding/);
      const after = await answered(api);
      expect(delta(after, before, 'POST 403')).toBe(1);
      expect(delta(after, before, 'POST 200')).toBe(0);
      expect(existsSync(marker)).toBe(false);
    } finally {
      await page.close();
    }
  });

  it('a page from localhost still works: JSON spawn and exec over fetch, and exec over WebSocket', async () => {
    const marker = join(srv.dir, 'ran-from-localhost');
    const wsMarker = join(srv.dir, 'ran-from-localhost-ws');
    const page = await browser.newPage();
    try {
      await page.goto(`http://localhost:${pagePort}/`);
      const count = await sandboxCount();
      const seen = await page.evaluate(
        async ({ api, marker, wsMarker }) => {
          const spawn = await fetch(`${api}/api/v1/sandboxes`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{}',
          });
          const sb = (await spawn.json()) as { id: string };
          const exec = await fetch(`${api}/api/v1/sandboxes/${sb.id}/exec`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ command: `touch ${marker}; echo done` }),
          });
          const out = (await exec.json()) as { stdout: string; exit_code: number };
          const ws = await new Promise<string>((resolve) => {
            const sock = new WebSocket(`${api.replace(/^http/, 'ws')}/api/v1/sandboxes/${sb.id}/exec/ws`);
            const timer = setTimeout(() => resolve('no answer'), 10_000);
            sock.onopen = () => sock.send(JSON.stringify({ type: 'start', command: `touch ${wsMarker}` }));
            sock.onmessage = (m) => {
              const msg = JSON.parse(String(m.data)) as { type: string; exit_code?: number };
              if (msg.type === 'exit') {
                clearTimeout(timer);
                resolve(`exit ${msg.exit_code}`);
              }
            };
            sock.onerror = () => resolve('error');
          });
          return { spawn: spawn.status, exec: exec.status, stdout: out.stdout, code: out.exit_code, ws };
        },
        { api, marker, wsMarker },
      );
      expect(seen).toEqual({ spawn: 201, exec: 200, stdout: 'done\n', code: 0, ws: 'exit 0' });
      expect(await sandboxCount()).toBe(count + 1);
      expect(existsSync(marker)).toBe(true);
      expect(existsSync(wsMarker)).toBe(true);
    } finally {
      await page.close();
    }
  });
});
