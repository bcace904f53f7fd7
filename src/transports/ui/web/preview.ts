/**
 * The sandbox view's Preview card: a port inside the sandbox opened at its live preview address,
 * `<port>-<sandbox_id>.<preview_domain>` on this page's scheme and port (README "Live preview").
 * With `server.preview_auth` the sandbox object carries `preview_token` (for its owner and admins),
 * and the link carries it once as `?sbx_token=` — the preview's own token, never the API key.
 * The last few ports opened are remembered per sandbox while the page is open.
 */
import type { ShownSandbox } from './api.js';
import { h } from './dom.js';

const recent = new Map<string, number[]>();
const KEEP = 5;

/** A port from the input's text: an integer 1–65535, or undefined. */
export function parsePort(value: string): number | undefined {
  const t = value.trim();
  if (!/^\d{1,5}$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 1 && n <= 65535 ? n : undefined;
}

/** The preview URL of `port` in sandbox `s`, on this page's scheme and port. */
export function previewUrl(s: Pick<ShownSandbox, 'id' | 'preview_domain' | 'preview_token'>, port: number): string {
  const url = new URL(`${location.protocol}//${port}-${s.id}.${s.preview_domain}${location.port ? `:${location.port}` : ''}/`);
  if (s.preview_token) url.searchParams.set('sbx_token', s.preview_token);
  return url.toString();
}

/** The card, and `show(sandbox)` to fill it in once the sandbox is read (and again when it changes). */
export function previewCard(id: string): { card: HTMLElement; show(s: ShownSandbox): void } {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const card = h('section', { class: 'card', id: 'preview' }, h('h2', {}, 'Preview'), body);
  let shown = '';
  const show = (s: ShownSandbox) => {
    const sig = `${s.preview_domain ?? ''}|${s.preview_token ?? ''}`;
    if (sig === shown) return;
    shown = sig;
    if (!s.preview_domain) {
      body.replaceChildren(
        h(
          'p',
          { id: 'preview-off' },
          'Previews are off on this server. To reach ports inside sandboxes by URL, set ',
          h('code', {}, 'server.preview_domain'),
          ' (e.g. ',
          h('code', {}, 'preview.localhost'),
          ', or ',
          h('code', {}, 'SVC_SERVER_PREVIEW_DOMAIN'),
          ') and restart sbx serve.',
        ),
      );
      return;
    }
    const input = h('input', {
      id: 'preview-port',
      type: 'number',
      min: '1',
      max: '65535',
      step: '1',
      inputmode: 'numeric',
      placeholder: '8080',
      required: true,
    });
    const link = h(
      'a',
      { id: 'preview-link', class: 'button', target: '_blank', rel: 'noopener noreferrer', 'aria-disabled': 'true' },
      'Open',
    );
    const problem = h('p', { class: 'err', id: 'preview-error', role: 'alert' });
    const list = h('ul', { class: 'recent', id: 'preview-recent', 'aria-label': 'Recently opened ports' });
    const remember = (port: number) => {
      const ports = [port, ...(recent.get(id) ?? []).filter((p) => p !== port)].slice(0, KEEP);
      recent.set(id, ports);
      drawRecent();
    };
    const drawRecent = () => {
      const ports = recent.get(id) ?? [];
      list.replaceChildren(
        ...ports.map((p) =>
          h(
            'li',
            {},
            h(
              'a',
              { href: previewUrl(s, p), target: '_blank', rel: 'noopener noreferrer', 'data-port': String(p), onclick: () => remember(p) },
              `port ${p}`,
            ),
          ),
        ),
      );
    };
    const update = () => {
      const port = parsePort(input.value);
      if (port === undefined) {
        link.removeAttribute('href');
        link.setAttribute('aria-disabled', 'true');
        problem.textContent = input.value.trim() === '' ? '' : 'A port is a whole number from 1 to 65535.';
        return;
      }
      link.href = previewUrl(s, port);
      link.removeAttribute('aria-disabled');
      problem.textContent = '';
    };
    input.addEventListener('input', update);
    link.addEventListener('click', (e) => {
      const port = parsePort(input.value);
      if (port === undefined) {
        e.preventDefault();
        problem.textContent = 'A port is a whole number from 1 to 65535.';
        input.focus();
        return;
      }
      remember(port);
    });
    const form = h(
      'form',
      {
        class: 'row',
        // Enter in the port box opens the preview like the link does.
        onsubmit: (e: Event) => {
          e.preventDefault();
          if (parsePort(input.value) !== undefined) link.click();
          else update();
        },
      },
      h('label', {}, 'Port inside the sandbox', input),
      link,
    );
    body.replaceChildren(
      h(
        'p',
        { class: 'muted' },
        'Opens ',
        h('code', {}, `<port>-${s.id}.${s.preview_domain}`),
        ' in a new tab',
        s.preview_token ? ' (with this sandbox\u2019s preview token).' : '.',
      ),
      form,
      problem,
      list,
    );
    drawRecent();
  };
  return { card, show };
}
