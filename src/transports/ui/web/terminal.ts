/**
 * The sandbox view's terminal over the WebSocket exec (`/api/v1/sandboxes/{id}/exec/ws`). A
 * browser's WebSocket cannot send the key header, so the key goes as a `sbx.key.<base64url>`
 * subprotocol after `sbx.v1` (never in the URL).
 *
 * Where the sandbox's provider has the `tty` capability (docker) it is a real terminal: `sh -i` in a
 * PTY (`tty: true` with the element's size in character cells, a `resize` message when the window
 * changes size), every key pressed in the focused screen goes to it as bytes (`stdin`), paste sends
 * the pasted text, and the output is drawn by a small screen model (screen.ts). Escape then Tab
 * leaves the screen (an Escape followed by any other key reaches the shell before that key). Elsewhere (mock, proot: pipes only) it
 * falls back to line mode: a line is sent on Enter, and the card says so.
 */
import { api, key } from './api.js';
import { h } from './dom.js';
import { onLeave } from './live.js';
import { Screen } from './screen.js';

type ServerMessage = { type: string; data?: string; encoding?: string; exit_code?: number; code?: string; message?: string };

/** Key → bytes for the keys that are not plain characters. */
const KEYS: Record<string, string> = {
  Enter: '\r',
  Backspace: '\x7f',
  Tab: '\t',
  Escape: '\x1b',
  ArrowUp: '\x1b[A',
  ArrowDown: '\x1b[B',
  ArrowRight: '\x1b[C',
  ArrowLeft: '\x1b[D',
  Home: '\x1b[H',
  End: '\x1b[F',
  Insert: '\x1b[2~',
  Delete: '\x1b[3~',
  PageUp: '\x1b[5~',
  PageDown: '\x1b[6~',
  F1: '\x1bOP',
  F2: '\x1bOQ',
  F3: '\x1bOR',
  F4: '\x1bOS',
};

/** The bytes a key press sends to a terminal, or undefined for keys the browser keeps (Ctrl+V paste, Cmd+…). */
export function keyBytes(
  e: Pick<KeyboardEvent, 'key' | 'ctrlKey' | 'altKey' | 'metaKey' | 'shiftKey'>,
  altGraph = false,
): string | undefined {
  if (e.metaKey) return undefined;
  const k = e.key;
  // AltGr (reported as Ctrl+Alt on some systems) types a character: send the character.
  if (altGraph && [...k].length === 1) return k;
  if (e.ctrlKey && !e.altKey && k.length === 1) {
    const c = k.toUpperCase().charCodeAt(0);
    if (k.toLowerCase() === 'v') return undefined; // paste
    if (c >= 0x40 && c <= 0x5f) return String.fromCharCode(c - 0x40); // ^@ ^A … ^Z ^[ ^\ ^] ^^ ^_
    if (k === ' ' || k === '2') return '\x00';
    if (k === '/' || k === '-') return '\x1f';
    return undefined;
  }
  const plain = KEYS[k] ?? ([...k].length === 1 && !e.ctrlKey ? k : undefined);
  if (plain === undefined) return undefined;
  if (k === 'Tab' && e.shiftKey) return '\x1b[Z';
  return e.altKey ? `\x1b${plain}` : plain;
}

/** The socket of a terminal: opened with the key as a subprotocol, JSON text frames both ways. */
function openSocket(id: string): WebSocket {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const enc = btoa(key()).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const protocols = ['sbx.v1'];
  if (key()) protocols.push(`sbx.key.${enc}`);
  return new WebSocket(`${proto}//${location.host}/api/v1/sandboxes/${encodeURIComponent(id)}/exec/ws`, protocols);
}

/** True when the sandbox's provider can run a command in a terminal (the `tty` capability). */
async function hasTty(id: string): Promise<{ tty: boolean; provider: string }> {
  const s = await api().get(id);
  const providers = await api().providers.list();
  return { tty: providers.find((p) => p.name === s.provider)?.capabilities.includes('tty') ?? false, provider: s.provider };
}

/** Output data as text (base64 when the server had to). */
const text = (m: ServerMessage): string =>
  m.encoding === 'base64' ? new TextDecoder().decode(Uint8Array.from(atob(m.data ?? ''), (c) => c.charCodeAt(0))) : (m.data ?? '');

export function terminalCard(id: string): HTMLElement {
  const mode = h('p', { class: 'muted', id: 'term-mode' }, 'Checking whether this sandbox has a terminal…');
  const button = h('button', { type: 'button', id: 'term-open', disabled: true }, 'Open terminal');
  const tty = ttyTerminal(id, button);
  const line = lineTerminal(id, button);
  tty.el.hidden = true;
  line.el.hidden = true;
  let current: { el: HTMLElement; open(): void; close(): boolean } = line;
  onLeave(() => (tty.close(), line.close()));
  button.addEventListener('click', () => {
    if (!current.close()) current.open();
  });
  void hasTty(id)
    .then(({ tty: yes, provider }) => {
      if (yes) {
        current = tty;
        mode.textContent = 'An interactive shell in a terminal: click the screen or Tab to it, then type. Escape then Tab leaves it.';
      } else
        mode.textContent =
          `Line mode: the ${provider} provider has no terminal (tty), so a line is sent when ` +
          `you press Enter and the shell has no prompt or line editing.`;
    })
    .catch(
      () =>
        (mode.textContent = 'Line mode: could not learn whether the provider has a terminal (tty); a line is sent when you press Enter.'),
    )
    .finally(() => {
      current.el.hidden = false;
      button.disabled = false;
    });
  return h('section', { class: 'card' }, h('h2', {}, 'Terminal'), mode, h('div', { class: 'row' }, button), line.el, tty.el);
}

/** The PTY terminal: a focusable screen whose key presses are the shell's input. */
function ttyTerminal(id: string, button: HTMLButtonElement) {
  const el = h('pre', {
    class: 'out term',
    id: 'term-screen',
    tabindex: '0',
    role: 'application',
    'aria-label': 'Terminal. Keys go to the shell; press Escape then Tab to leave.',
    'aria-roledescription': 'terminal',
  });
  let ws: WebSocket | null = null;
  let releasing = false;
  const send = (msg: object) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify(msg));
  const screen = new Screen(80, 24, 2000, (data) => send({ type: 'stdin', data }));
  let drawing = 0;
  const draw = () => {
    drawing ||= requestAnimationFrame(() => {
      drawing = 0;
      const [before, under, after] = screen.parts();
      el.replaceChildren(before, h('span', { class: 'cursor' }, under), after);
      el.scrollTop = el.scrollHeight;
    });
  };
  const out = (s: string) => (screen.write(s), draw());
  /** The screen's size in character cells (a monospace cell measured in the element). */
  const cells = (): { cols: number; rows: number } => {
    const probe = h('span', {}, 'MMMMMMMMMM');
    el.append(probe);
    const r = probe.getBoundingClientRect();
    probe.remove();
    const cs = getComputedStyle(el);
    const w = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const ht = el.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom);
    const cw = r.width / 10 || 8;
    const lh = parseFloat(cs.lineHeight) || r.height || 16;
    return { cols: Math.max(10, Math.min(500, Math.floor(w / cw))), rows: Math.max(4, Math.min(200, Math.floor(ht / lh))) };
  };
  const fit = () => {
    if (!ws) return;
    const { cols, rows } = cells();
    if (cols === screen.cols && rows === screen.rows) return;
    screen.resize(cols, rows);
    send({ type: 'resize', cols, rows });
  };
  let resizeTimer: ReturnType<typeof setTimeout> | undefined;
  const onResize = () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(fit, 150);
  };
  // Escape waits for the next key: Tab (or Shift+Tab) leaves the screen and the Escape is dropped;
  // any other key goes after it.
  el.addEventListener('keydown', (e) => {
    if (!ws || e.isComposing) return;
    if (releasing && e.key === 'Tab') {
      releasing = false;
      return; // the browser moves focus on
    }
    if (e.key === 'Escape' && !e.ctrlKey && !e.altKey && !e.metaKey) {
      e.preventDefault();
      if (releasing) send({ type: 'stdin', data: '\x1b' });
      releasing = true;
      return;
    }
    const bytes = keyBytes(e, e.getModifierState('AltGraph'));
    if (bytes === undefined) return;
    e.preventDefault();
    send({ type: 'stdin', data: releasing ? `\x1b${bytes}` : bytes });
    releasing = false;
  });
  el.addEventListener('blur', () => (releasing = false));
  el.addEventListener('paste', (e) => {
    const pasted = e.clipboardData?.getData('text/plain');
    if (!ws || !pasted) return;
    e.preventDefault();
    releasing = false;
    send({ type: 'stdin', data: pasted.replace(/\r?\n/g, '\r') });
  });
  const open = () => {
    const sock = openSocket(id);
    ws = sock;
    sock.onopen = () => {
      const { cols, rows } = cells();
      screen.resize(cols, rows);
      sock.send(
        JSON.stringify({ type: 'start', command: 'sh', args: ['-i'], mode: 'argv', tty: true, cols, rows, env: { TERM: 'xterm' } }),
      );
      button.textContent = 'Close terminal';
      window.addEventListener('resize', onResize);
      el.focus();
    };
    sock.onmessage = (m) => {
      const msg = JSON.parse(String(m.data)) as ServerMessage;
      if (msg.type === 'stdout' || msg.type === 'stderr') out(text(msg));
      else if (msg.type === 'exit') out(`\r\n[exit ${msg.exit_code}]\r\n`);
      else if (msg.type === 'error') out(`\r\n${msg.code}: ${msg.message}\r\n`);
    };
    sock.onclose = () => {
      if (ws === sock) ws = null;
      window.removeEventListener('resize', onResize);
      button.textContent = 'Open terminal';
      out('\r\n[terminal closed]\r\n');
    };
  };
  const close = () => {
    if (!ws) return false;
    ws.close();
    return true;
  };
  return { el, open, close };
}

/** Line mode (no terminal at the provider): an input whose line goes to the shell on Enter. */
function lineTerminal(id: string, button: HTMLButtonElement) {
  const termOut = h('pre', { class: 'out', id: 'term-output', 'aria-live': 'polite' });
  const termIn = h('input', { id: 'term-input', autocomplete: 'off', spellcheck: false, disabled: true });
  let ws: WebSocket | null = null;
  const append = (cls: string, s: string) => {
    termOut.append(h('span', { class: cls }, s));
    while (termOut.childNodes.length > 2000) termOut.firstChild?.remove();
    termOut.scrollTop = termOut.scrollHeight;
  };
  const open = () => {
    const sock = openSocket(id);
    ws = sock;
    sock.onopen = () => {
      sock.send(JSON.stringify({ type: 'start', command: 'sh', args: ['-i'], mode: 'argv', tty: false }));
      termIn.disabled = false;
      button.textContent = 'Close terminal';
      termIn.focus();
    };
    sock.onmessage = (m) => {
      const msg = JSON.parse(String(m.data)) as ServerMessage;
      if (msg.type === 'stdout' || msg.type === 'stderr') append(msg.type, text(msg));
      else if (msg.type === 'exit') append('meta', `[exit ${msg.exit_code}]\n`);
      else if (msg.type === 'error') append('stderr', `${msg.message}\n`);
    };
    sock.onclose = () => {
      if (ws === sock) ws = null;
      termIn.disabled = true;
      button.textContent = 'Open terminal';
      append('meta', '[terminal closed]\n');
    };
  };
  const form = h(
    'form',
    {
      class: 'row',
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        if (!ws) return;
        append('meta', `${termIn.value}\n`);
        ws.send(JSON.stringify({ type: 'stdin', data: `${termIn.value}\n` }));
        termIn.value = '';
      },
    },
    h('label', { class: 'grow' }, 'Terminal input (Enter sends a line)', termIn),
  );
  const close = () => {
    if (!ws) return false;
    ws.close();
    return true;
  };
  return { el: h('div', {}, form, termOut), open, close };
}
