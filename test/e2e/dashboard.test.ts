/**
 * The dashboard at /ui (issue 19) in a real browser: Debian Chromium driven by playwright-core
 * against a real `sbx serve` with auth on — docker when SBX_TEST_DOCKER=1, else the mock provider.
 * Load, sign in with the key, spawn from the UI, run a command and watch its output stream, type
 * into the terminal (on docker a real TTY: keys, line editing, Ctrl+C; on mock line mode), get a
 * preview link for a port (with the sandbox's preview token), upload a file (picker and drag-and-drop) and see it listed, download it
 * byte-exact, see an event arrive
 * live, destroy. Screenshots of each view go to test/e2e/screenshots/ (gitignored). Also: /ui is
 * 404 with `server.ui: false`, carries a strict CSP, and the key never appears in a URL the page
 * requests.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { TEST_IMAGE } from '../docker/engine.js';

const CHROMIUM = process.env.SBX_TEST_CHROMIUM ?? '/usr/bin/chromium';
const REQUIRED = process.env.SBX_TEST_BROWSER === '1';
const SKIP = existsSync(CHROMIUM) || REQUIRED ? undefined : `no Chromium at ${CHROMIUM} (SBX_TEST_BROWSER=1 makes this suite mandatory)`;
const DOCKER = process.env.SBX_TEST_DOCKER === '1';
const KEY = `dash-${randomBytes(18).toString('hex')}`;
const SHOTS = join(import.meta.dirname, 'screenshots');

describe.skipIf(SKIP !== undefined)(`dashboard in Chromium on ${DOCKER ? 'docker' : 'mock'}${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  let srv: TestServer;
  let off: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const urls: string[] = [];
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${srv.url}/api/v1${path}`, {
      ...init,
      headers: { 'x-api-key': KEY, 'content-type': 'application/json', ...(init.headers ?? {}) },
    }).then(async (r) => {
      // Read every body, so no connection is left half-read when the server closes.
      const text = await r.text();
      return { status: r.status, json: () => JSON.parse(text) as unknown };
    });
  const t0 = Date.now();
  const mark = (what: string) => process.env.SBX_TEST_TRACE && console.log(`${Date.now() - t0} ms ${what}`);
  const shot = (name: string) => mark(name) || page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    // The route serves dist/ui, built from the sources under test once per run (test/helpers/build-setup.ts).
    mkdirSync(SHOTS, { recursive: true });
    const provider = DOCKER ? { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } } : {};
    srv = await startTestServer({
      auth: { api_key: KEY },
      server: { preview_domain: 'preview.localhost', preview_auth: true },
      ...provider,
    });
    off = await startTestServer({ server: { ui: false } });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
      timeout: 60_000,
    });
    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1200, height: 900 } });
    page = await context.newPage();
    page.on('request', (r) => urls.push(r.url()));
    page.on('websocket', (ws) => urls.push(ws.url()));
    page.on('dialog', (d) => void d.accept());
  }, 120_000);

  afterAll(async () => {
    mark('afterAll');
    await page?.goto('about:blank').catch(() => {});
    await srv?.close();
    mark('server closed with browser open');
    await browser?.close();
    mark('browser closed');
    await off?.close();
  }, 150_000);

  const get = async (url: string) => {
    const r = await fetch(url);
    await r.arrayBuffer();
    return r;
  };

  it('is 404 with server.ui: false, and serves its files with a strict CSP', async () => {
    expect((await get(`${off.url}/ui`)).status).toBe(404);
    expect((await get(`${off.url}/ui/app.js`)).status).toBe(404);
    const res = await get(`${srv.url}/ui`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const js = await get(`${srv.url}/ui/app.js`);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toContain('max-age');
    expect((await get(`${srv.url}/ui/nope.js`)).status).toBe(404);
    // The API itself still wants the key.
    expect((await get(`${srv.url}/api/v1/sandboxes`)).status).toBe(401);
  });

  /** Line mode (a provider without a terminal): a line goes to the shell on Enter. */
  const lineTerminal = async () => {
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('#term-mode', { hasText: 'Line mode' }).waitFor();
    await expect.poll(() => page.locator('#term-input').isEnabled(), { timeout: 20_000 }).toBe(true);
    await page.locator('#term-input').fill('echo term-$((40+2))');
    await page.locator('#term-input').press('Enter');
    await page.locator('#term-output', { hasText: 'term-42' }).waitFor({ timeout: 20_000 });
    await page.locator('#term-output').screenshot({ path: join(SHOTS, '02a-terminal.png') });
    await page.locator('#term-input').fill('exit');
    await page.locator('#term-input').press('Enter');
    await page.locator('#term-output', { hasText: '[exit 0]' }).waitFor({ timeout: 20_000 });
  };

  /** The TTY terminal (docker): keys go to a shell in a PTY; its screen shows what a terminal would. */
  const ttyTerminal = async () => {
    const term = page.locator('#term-screen');
    const screen = async () => ((await term.textContent()) ?? '').replace(/\u00a0/g, ' ');
    const focused = () => page.evaluate(() => (globalThis as any).document.activeElement?.id as string | undefined);
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('#term-mode', { hasText: 'interactive shell' }).waitFor();
    expect(await term.getAttribute('aria-label')).toMatch(/Escape then Tab/);
    await expect.poll(focused, { timeout: 20_000 }).toBe('term-screen');
    // The prompt: busybox sh's `# ` (root) or `$ `.
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/[#$] +$/m);
    await term.pressSequentially('echo $((6*7))');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/^42\s*$/m);
    // Line editing: the shell erases the extra character on Backspace, and the screen shows the edit.
    await term.pressSequentially('echo edited-linee');
    await term.press('Backspace');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/^edited-line\s*$/m);
    expect(await screen()).toMatch(/echo edited-line\s*$/m);
    expect(await screen()).not.toContain('linee');
    // The PTY knows the element's size (a resize was sent on open).
    await term.pressSequentially('stty size');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/^\d+ \d+\s*$/m);
    const [rows, cols] = (await screen())
      .match(/^(\d+) (\d+)\s*$/m)!
      .slice(1)
      .map(Number);
    expect(rows).toBeGreaterThanOrEqual(4);
    expect(cols).toBeGreaterThanOrEqual(40);
    expect(cols).not.toBe(80);
    // Ctrl+C interrupts the foreground command: the next command answers long before sleep 30 would end.
    await term.pressSequentially('sleep 30');
    await term.press('Enter');
    await page.waitForTimeout(1000);
    const interrupted = Date.now();
    await term.press('Control+c');
    await term.pressSequentially('echo after-$((1+1))');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 8_000 }).toMatch(/^after-2\s*$/m);
    expect(Date.now() - interrupted).toBeLessThan(10_000);
    // Paste sends the text, newlines as Enter.
    await term.evaluate((el) => {
      const g = globalThis as any;
      const data = new g.DataTransfer();
      data.setData('text/plain', 'echo pasted-$((2+3))\n');
      (el as any).dispatchEvent(new g.ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/^pasted-5\s*$/m);
    // A narrower window: the PTY is resized to the new width.
    await page.setViewportSize({ width: 800, height: 900 });
    await page.waitForTimeout(500);
    await term.pressSequentially('echo cols-$(stty size | cut -d" " -f2)');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 20_000 }).toMatch(/^cols-\d+\s*$/m);
    const narrower = Number((await screen()).match(/^cols-(\d+)\s*$/m)![1]);
    expect(narrower).toBeLessThan(cols!);
    await page.setViewportSize({ width: 1200, height: 900 });
    await term.screenshot({ path: join(SHOTS, '02a-terminal.png') });
    // Escape then Tab leaves the screen; clicking it comes back, and nothing stray reached the shell.
    await term.press('Escape');
    await term.press('Tab');
    expect(await focused()).not.toBe('term-screen');
    await term.click();
    await term.pressSequentially('exit');
    await term.press('Enter');
    await expect.poll(screen, { timeout: 20_000 }).toContain('[exit 0]');
  };

  it('signs in, spawns, streams a command, runs the terminal, uploads and downloads, shows live events, destroys', async () => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      // Failed responses are judged below by URL (a 401 before sign-in is expected).
      if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(m.text());
    });
    const failed: string[] = [];
    page.on('response', (r) => {
      if (r.status() >= 400 && !(r.status() === 401 && r.url().includes('/api/v1/sandboxes?limit=1')))
        failed.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${srv.url}/ui`);
    await page.getByLabel('API key').waitFor();
    await shot('01-sign-in');
    await page.getByLabel('API key').fill(KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#sandboxes').waitFor();
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('sbx.api_key'))).toBe(KEY);

    // Spawn from the UI → the sandbox view.
    await page.getByRole('button', { name: 'Spawn sandbox' }).click();
    await page.locator('#sandbox-id').waitFor({ timeout: 60_000 });
    const id = (await page.locator('#sandbox-id').textContent())!;
    expect(id).toMatch(/\S/);
    await expect.poll(() => page.locator('[data-field="state"]').textContent(), { timeout: 30_000 }).toBe('running');

    // Exec streams: the first line shows before the command ends.
    await page.getByLabel('Command (sh -c)').fill('echo first-line; sleep 2; echo second-line; echo oops >&2');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('#exec-output .stdout', { hasText: 'first-line' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#exec-output .stdout').allTextContents()).not.toContain('second-line\n');
    await page.locator('#exec-output', { hasText: '[exit 0' }).waitFor({ timeout: 20_000 });
    expect((await page.locator('#exec-output .stdout').allTextContents()).join('')).toBe('first-line\nsecond-line\n');
    expect(await page.locator('#exec-output .stderr').textContent()).toContain('oops');

    // Terminal over the WebSocket (the key travels as a subprotocol, not in the URL).
    if (DOCKER) await ttyTerminal();
    else await lineTerminal();

    // Preview: a link for a port, on this page's scheme and port, carrying the sandbox's preview token.
    const sandbox = (await api(`/sandboxes/${id}`)).json() as { preview_domain?: string; preview_token?: string };
    expect(sandbox.preview_domain).toBe('preview.localhost');
    expect(sandbox.preview_token).toMatch(/\S/);
    const port = page.getByLabel('Port inside the sandbox');
    await port.fill('70000');
    await page.locator('#preview-error', { hasText: '1 to 65535' }).waitFor();
    expect(await page.locator('#preview-link').getAttribute('href')).toBeNull();
    await port.fill('8080');
    const href = `http://8080-${id}.preview.localhost:${new URL(srv.url).port}/?sbx_token=${encodeURIComponent(sandbox.preview_token!)}`;
    await expect.poll(() => page.locator('#preview-link').getAttribute('href')).toBe(href);
    expect(await page.locator('#preview-link').getAttribute('target')).toBe('_blank');
    expect(await page.locator('#preview-link').getAttribute('rel')).toBe('noopener noreferrer');
    // Opening it remembers the port. The navigation itself is cancelled (nothing listens on 8080), and the
    // click is a DOM event, not a mouse: a browser may preconnect to a link it hovers, and a connection
    // that never sends a request holds the server's close for a minute.
    await page.evaluate(() => (globalThis as any).document.addEventListener('click', (e: Event) => e.preventDefault(), { once: true }));
    await page.locator('#preview-link').dispatchEvent('click');
    await page.locator('#preview-recent a[data-port="8080"]').waitFor();
    expect(await page.locator('#preview-recent a[data-port="8080"]').getAttribute('href')).toBe(href);
    await page.locator('#preview').screenshot({ path: join(SHOTS, '02b-preview-card.png') });

    // Upload (file input) and see it listed; download it byte-exact.
    const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4096)]);
    await page.getByLabel('Folder').fill('/tmp');
    await page.setInputFiles('#upload', { name: 'blob.bin', mimeType: 'application/octet-stream', buffer: bytes });
    await page.locator('#files tr[data-name="blob.bin"]').waitFor({ timeout: 20_000 });
    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('button[data-download="blob.bin"]').click()]);
    expect(download.suggestedFilename()).toBe('blob.bin');
    const got = readFileSync((await download.path())!);
    expect(Buffer.compare(got, bytes)).toBe(0);
    // Drag and drop onto the drop zone uploads too.
    const dt = await page.evaluateHandle(() => {
      const g = globalThis as any;
      const t = new g.DataTransfer();
      t.items.add(new g.File(['dropped text\n'], 'dropped.txt', { type: 'text/plain' }));
      return t;
    });
    await page.dispatchEvent('#drop', 'drop', { dataTransfer: dt });
    await page.locator('#files tr[data-name="dropped.txt"]').waitFor({ timeout: 20_000 });
    // The folder shown is watched: a file written behind the page's back appears without a click.
    const written = await api(`/sandboxes/${id}/files`, { method: 'POST', body: JSON.stringify({ path: '/tmp/live.txt', content: 'x' }) });
    expect(written.status).toBe(200);
    await page.locator('#files tr[data-name="live.txt"]').waitFor({ timeout: 20_000 });
    await shot('02-sandbox');

    // Events arrive live: a sandbox spawned behind the page's back shows up in the feed.
    await page.getByRole('button', { name: 'Events' }).click();
    await page.locator('#events').waitFor();
    const other = (await api('/sandboxes', { method: 'POST', body: '{}' })).json() as { id: string };
    await page.locator('#events li', { hasText: other.id }).first().waitFor({ timeout: 30_000 });
    await shot('03-events');

    // The list updates live too, and filters.
    await page.getByRole('button', { name: 'Sandboxes' }).click();
    await page.locator(`#sandboxes tr[data-id="${other.id}"]`).waitFor();
    await shot('04-sandboxes');
    await page.getByLabel('Filter').fill(other.id);
    await expect.poll(() => page.locator('#sandboxes tbody tr').count()).toBe(1);
    await api(`/sandboxes/${other.id}`, { method: 'DELETE' });
    await page.getByLabel('Filter').fill('');

    // Secrets: names, hosts and fingerprints; never a value (DESIGN §15).
    const made = await api('/secrets', {
      method: 'POST',
      body: JSON.stringify({ name: 'UI_TOKEN', value: 'ui-secret-value-2b4d', hosts: ['api.example.com'] }),
    });
    expect(made.status).toBe(201);
    await page.getByRole('button', { name: 'Secrets' }).click();
    await page.locator('main section.card td', { hasText: 'UI_TOKEN' }).waitFor();
    expect(await page.locator('main').innerText()).toContain('api.example.com');
    expect(await page.content()).not.toContain('ui-secret-value-2b4d');
    await api('/secrets/UI_TOKEN', { method: 'DELETE' });

    for (const view of ['Templates', 'System']) {
      await page.getByRole('button', { name: view }).click();
      // The event stream keeps the network busy: wait for the view's content instead of idleness.
      await page
        .locator(view === 'System' ? '#sys-providers table, #sys-providers p' : 'main section.card table, main section.card p')
        .first()
        .waitFor();
      await page.waitForTimeout(300);
      await shot(`05-${view.toLowerCase()}`);
    }

    // Phone width.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: 'Sandboxes' }).click();
    await page.locator('#sandboxes').waitFor();
    await shot('06-phone');
    await page.setViewportSize({ width: 1200, height: 900 });

    // Pause and resume from the UI (DESIGN.md §16): the state follows the events.
    await page.goto(`${srv.url}/ui#/sandbox/${encodeURIComponent(id)}`);
    await page.locator('#pause').click();
    await expect.poll(() => page.locator('[data-field="state"]').textContent(), { timeout: 30_000 }).toBe('paused');
    expect(((await api(`/sandboxes/${id}`)).json() as { state: string }).state).toBe('paused');
    await page.locator('#resume').click();
    await expect.poll(() => page.locator('[data-field="state"]').textContent(), { timeout: 30_000 }).toBe('running');

    // Destroy from the UI.
    await page.locator('#destroy').click();
    await page.locator('#sandboxes').waitFor();
    await expect.poll(async () => (await api(`/sandboxes/${id}`)).status, { timeout: 30_000 }).toBe(404);

    // The key is never in a URL the page asked for (HTTP or WebSocket), plain or encoded.
    const b64 = Buffer.from(KEY).toString('base64url');
    expect(urls.length).toBeGreaterThan(5);
    for (const u of urls) {
      expect(u).not.toContain(KEY);
      expect(u).not.toContain(b64);
    }
    expect(errors).toEqual([]);
    // Pool status is 404 when the pool is off; the view shows that as text.
    expect(failed.filter((f) => !f.endsWith('/api/v1/pool/status'))).toEqual([]);
  }, 240_000);

  it('says previews are off, and how to turn them on, without server.preview_domain', async () => {
    const plain = await startTestServer({});
    const tab = await context.newPage();
    try {
      const r = await fetch(`${plain.url}/api/v1/sandboxes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      const { id } = (await r.json()) as { id: string };
      await tab.goto(`${plain.url}/ui#/sandbox/${encodeURIComponent(id)}`);
      await tab.locator('#preview-off').waitFor({ timeout: 30_000 });
      expect(await tab.locator('#preview-off').textContent()).toContain('server.preview_domain');
      expect(await tab.locator('#preview-link').count()).toBe(0);
      await tab.locator('#preview').screenshot({ path: join(SHOTS, '02c-preview-off.png') });
    } finally {
      await tab.close();
      await plain.close();
    }
  }, 60_000);
});
