/**
 * The sbx dashboard (issue 19): one small module, no framework, talking to the same HTTP API as
 * the CLI. The key the user enters lives in sessionStorage and travels only in the `X-API-Key`
 * header (and, for the terminal's WebSocket, which cannot carry headers from a browser, in a
 * `Sec-WebSocket-Protocol` entry) — never in a URL.
 */
const KEY_SLOT = 'sbx.api_key';
const API = '/api/v1';

interface Sandbox {
  id: string;
  state: string;
  provider: string;
  image: string;
  owner_id?: string;
  worker_id?: string;
  created_at: string;
  expires_at: string;
  preview_domain?: string;
  template?: string;
}
interface FileInfo {
  name: string;
  path: string;
  size: number;
  is_dir: boolean;
  mod_time: string;
  mode: string;
}
interface SbxEvent {
  id: number | string;
  type: string;
  timestamp: string;
  sandbox_id?: string;
  owner_id?: string;
  worker_id?: string;
  data?: unknown;
}

const main = document.getElementById('main') as HTMLElement;
const statusLine = document.getElementById('status') as HTMLElement;
const nav = document.getElementById('nav') as HTMLElement;

const key = (): string => sessionStorage.getItem(KEY_SLOT) ?? '';

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (key() !== '') headers.set('X-API-Key', key());
  const res = await fetch(API + path, { ...init, headers, cache: 'no-store', credentials: 'omit' });
  if (!res.ok) {
    let code = 'error';
    let message = `${res.status} ${res.statusText}`;
    try {
      const body = (await res.json()) as { code?: string; message?: string };
      code = body.code ?? code;
      message = body.message ?? message;
    } catch {
      /* not JSON */
    }
    if (res.status === 401) showLogin(message);
    throw new ApiError(res.status, code, message);
  }
  return res;
}
const getJson = async <T>(path: string): Promise<T> => (await (await api(path)).json()) as T;
const sendJson = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
  const res = await api(path, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? '' : JSON.stringify(body) });
  const text = await res.text();
  return (text ? JSON.parse(text) : {}) as T;
};

function say(text: string, bad = false): void {
  statusLine.textContent = text;
  statusLine.className = bad ? 'err' : '';
}

/** Tiny element builder: h('button', {type: 'button', onclick}, 'text'). */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, props: Record<string, unknown> = {}, ...children: Array<Node | string | null | undefined>): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (k === 'class') el.className = String(v);
    else if (k in el && typeof v !== 'string') (el as unknown as Record<string, unknown>)[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c);
  return el;
}
const when = (iso: string | undefined): string => (iso ? new Date(iso).toLocaleString() : '');
const size = (n: number): string => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
const errText = (e: unknown): string => (e instanceof ApiError ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e));

// ---------------------------------------------------------------------------------------- login

function showLogin(problem = ''): void {
  stopEvents();
  nav.hidden = true;
  const input = h('input', { id: 'api-key', type: 'password', autocomplete: 'off', required: true, spellcheck: false });
  const form = h(
    'form',
    {
      class: 'row',
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        sessionStorage.setItem(KEY_SLOT, input.value.trim());
        try {
          await getJson('/sandboxes?limit=1');
          start();
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 401)) say(errText(e), true);
        }
      },
    },
    h('label', { class: 'grow' }, 'API key', input),
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  main.replaceChildren(
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'login-title' },
      h('h2', { id: 'login-title' }, 'Sign in'),
      h('p', { class: 'muted' }, 'Enter the server’s API key. It is kept in this tab’s session storage only and sent in the X-API-Key header.'),
      form,
      problem ? h('p', { class: 'err', role: 'alert' }, problem) : null,
    ),
  );
  input.focus();
}

// ------------------------------------------------------------------------------------- events

const events: SbxEvent[] = [];
const eventListeners = new Set<(e: SbxEvent) => void>();
let eventAbort: AbortController | null = null;

function stopEvents(): void {
  eventAbort?.abort();
  eventAbort = null;
}

/** Reads the SSE stream with fetch (EventSource cannot send the key header); reconnects with Last-Event-ID. */
async function runEvents(): Promise<void> {
  stopEvents();
  const ctl = new AbortController();
  eventAbort = ctl;
  let lastId = '';
  while (!ctl.signal.aborted) {
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastId) headers['last-event-id'] = lastId;
      const res = await api('/events', { headers, signal: ctl.signal });
      say('live: connected to the event stream');
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let data = '';
          for (const line of frame.split('\n')) {
            if (line.startsWith('data:')) data += line.slice(5).trimStart();
            else if (line.startsWith('id:')) lastId = line.slice(3).trim();
          }
          if (!data) continue;
          try {
            const ev = JSON.parse(data) as SbxEvent;
            events.push(ev);
            if (events.length > 500) events.shift();
            for (const l of eventListeners) l(ev);
          } catch {
            /* not an event */
          }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
      if (e instanceof ApiError && e.status === 401) return;
      say(`event stream: ${errText(e)}; reconnecting`, true);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function onEvent(l: (e: SbxEvent) => void): void {
  eventListeners.add(l);
  viewCleanup.push(() => eventListeners.delete(l));
}

// -------------------------------------------------------------------------------------- views

let viewCleanup: Array<() => void> = [];

function route(): void {
  for (const c of viewCleanup) c();
  viewCleanup = [];
  const hash = location.hash.replace(/^#\/?/, '');
  const [view = 'sandboxes', arg] = hash.split('/');
  for (const b of nav.querySelectorAll<HTMLButtonElement>('button[data-view]')) {
    if (b.dataset.view === view || (view === 'sandbox' && b.dataset.view === 'sandboxes')) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
  if (view === 'sandbox' && arg) return void sandboxView(decodeURIComponent(arg));
  if (view === 'events') return void eventsView();
  if (view === 'templates') return void templatesView();
  if (view === 'system') return void systemView();
  return void sandboxesView();
}

function debounce(fn: () => void, ms: number): () => void {
  let t: ReturnType<typeof setTimeout> | undefined;
  return () => {
    clearTimeout(t);
    t = setTimeout(fn, ms);
  };
}

async function sandboxesView(): Promise<void> {
  const filter = h('input', { id: 'filter', type: 'search', placeholder: 'id, state, owner, provider, image…' });
  const image = h('input', { id: 'spawn-image', placeholder: 'server default' });
  const ttl = h('input', { id: 'spawn-ttl', placeholder: 'e.g. 30m' });
  const body = h('tbody');
  const count = h('span', { class: 'muted' });
  let list: Sandbox[] = [];
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const shown = list.filter((s) => !q || [s.id, s.state, s.owner_id, s.provider, s.image, s.worker_id, s.template].some((v) => v?.toLowerCase().includes(q)));
    count.textContent = `${shown.length} of ${list.length}`;
    body.replaceChildren(
      ...shown.map((s) =>
        h(
          'tr',
          { 'data-id': s.id },
          h('td', {}, h('a', { class: 'id', href: `#/sandbox/${encodeURIComponent(s.id)}` }, s.id)),
          h('td', { class: `state state-${s.state}` }, s.state),
          h('td', {}, s.owner_id ?? ''),
          h('td', {}, s.provider),
          h('td', { class: 'opt' }, s.worker_id ?? ''),
          h('td', { class: 'opt' }, s.image),
          h('td', {}, when(s.expires_at)),
        ),
      ),
    );
    if (shown.length === 0) body.append(h('tr', {}, h('td', { colspan: '7', class: 'muted' }, list.length ? 'No sandbox matches the filter.' : 'No sandboxes yet.')));
  };
  const load = async () => {
    try {
      list = await getJson<Sandbox[]>('/sandboxes');
      render();
    } catch (e) {
      say(errText(e), true);
    }
  };
  filter.addEventListener('input', render);
  const spawnForm = h(
    'form',
    {
      class: 'row',
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        const req: Record<string, unknown> = {};
        if (image.value.trim()) req.image = image.value.trim();
        if (ttl.value.trim()) req.ttl = ttl.value.trim();
        say('spawning…');
        try {
          const s = await sendJson<Sandbox>('POST', '/sandboxes', req);
          say(`spawned ${s.id}`);
          location.hash = `#/sandbox/${encodeURIComponent(s.id)}`;
        } catch (e) {
          say(`spawn failed: ${errText(e)}`, true);
        }
      },
    },
    h('label', { class: 'grow' }, 'Image', image),
    h('label', {}, 'TTL', ttl),
    h('button', { type: 'submit', class: 'primary', id: 'spawn' }, 'Spawn sandbox'),
  );
  main.replaceChildren(
    h('section', { class: 'card' }, h('h2', {}, 'New sandbox'), spawnForm),
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Sandboxes ', count),
      h('div', { class: 'row' }, h('label', { class: 'grow' }, 'Filter', filter)),
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { id: 'sandboxes' },
          h('thead', {}, h('tr', {}, ...['ID', 'State', 'Owner', 'Provider'].map((t) => h('th', { scope: 'col' }, t)), h('th', { scope: 'col', class: 'opt' }, 'Worker'), h('th', { scope: 'col', class: 'opt' }, 'Image'), h('th', { scope: 'col' }, 'Expires'))),
          body,
        ),
      ),
    ),
  );
  const reload = debounce(load, 150);
  onEvent((e) => {
    if (e.type.startsWith('sandbox.')) reload();
  });
  await load();
}

async function sandboxView(id: string): Promise<void> {
  const path = `/sandboxes/${encodeURIComponent(id)}`;
  const info = h('dl', { class: 'row' });
  const showInfo = async () => {
    try {
      const s = await getJson<Sandbox>(path);
      const pairs: Array<[string, string]> = [
        ['State', s.state],
        ['Owner', s.owner_id ?? '—'],
        ['Provider', s.provider],
        ['Worker', s.worker_id ?? '—'],
        ['Image', s.image],
        ['Created', when(s.created_at)],
        ['Expires', when(s.expires_at)],
      ];
      if (s.preview_domain) pairs.push(['Preview', s.preview_domain]);
      info.replaceChildren(...pairs.flatMap(([k, v]) => [h('div', {}, h('dt', { class: 'muted' }, k), h('dd', { class: k === 'State' ? `state state-${v}` : '', 'data-field': k.toLowerCase() }, v))]));
    } catch (e) {
      info.replaceChildren(h('p', { class: 'err' }, errText(e)));
    }
  };

  // Exec console: NDJSON stream with an exit record.
  const cmd = h('input', { id: 'exec-command', placeholder: 'echo hello', autocomplete: 'off', spellcheck: false });
  const out = h('pre', { class: 'out', id: 'exec-output', 'aria-live': 'polite' });
  let execAbort: AbortController | null = null;
  viewCleanup.push(() => execAbort?.abort());
  const append = (cls: string, text: string) => out.append(h('span', { class: cls }, text));
  const execForm = h(
    'form',
    {
      class: 'row',
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        const command = cmd.value;
        if (!command.trim()) return;
        execAbort?.abort();
        const ctl = new AbortController();
        execAbort = ctl;
        append('meta', `$ ${command}\n`);
        try {
          const res = await api(`${path}/exec`, { method: 'POST', signal: ctl.signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ command, stream: true, exit_record: true }) });
          const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
          let buf = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let nl: number;
            while ((nl = buf.indexOf('\n')) >= 0) {
              const line = buf.slice(0, nl);
              buf = buf.slice(nl + 1);
              if (!line.trim()) continue;
              const chunk = JSON.parse(line) as { stream: string; data: string; exit_code?: number; duration?: string };
              if (chunk.stream === 'exit') append('meta', `[exit ${chunk.exit_code}${chunk.duration ? ` in ${chunk.duration}` : ''}]\n`);
              else append(chunk.stream, chunk.data);
              out.scrollTop = out.scrollHeight;
            }
          }
        } catch (e) {
          if (!ctl.signal.aborted) append('stderr', `${errText(e)}\n`);
        }
      },
    },
    h('label', { class: 'grow' }, 'Command (sh -c)', cmd),
    h('button', { type: 'submit', class: 'primary', id: 'exec-run' }, 'Run'),
    h('button', { type: 'button', onclick: () => execAbort?.abort() }, 'Stop'),
    h('button', { type: 'button', onclick: () => out.replaceChildren() }, 'Clear'),
  );

  // Terminal: the WebSocket exec with a shell; line-oriented.
  const termOut = h('pre', { class: 'out', id: 'term-output', 'aria-live': 'polite' });
  const termIn = h('input', { id: 'term-input', autocomplete: 'off', spellcheck: false, disabled: true });
  let ws: WebSocket | null = null;
  viewCleanup.push(() => ws?.close());
  const termButton = h('button', { type: 'button', id: 'term-open' }, 'Open terminal');
  termButton.addEventListener('click', () => {
    if (ws) {
      ws.close();
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const enc = btoa(key()).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const protocols = ['sbx.v1'];
    if (key()) protocols.push(`sbx.key.${enc}`);
    const sock = new WebSocket(`${proto}//${location.host}${API}${path}/exec/ws`, protocols);
    ws = sock;
    sock.onopen = () => {
      sock.send(JSON.stringify({ type: 'start', command: 'sh', args: ['-i'], mode: 'argv', tty: false }));
      termIn.disabled = false;
      termButton.textContent = 'Close terminal';
      termIn.focus();
    };
    sock.onmessage = (m) => {
      const msg = JSON.parse(String(m.data)) as { type: string; data?: string; exit_code?: number; message?: string };
      if (msg.type === 'stdout' || msg.type === 'stderr') termOut.append(h('span', { class: msg.type }, msg.data ?? ''));
      else if (msg.type === 'exit') termOut.append(h('span', { class: 'meta' }, `[exit ${msg.exit_code}]\n`));
      else if (msg.type === 'error') termOut.append(h('span', { class: 'stderr' }, `${msg.message}\n`));
      termOut.scrollTop = termOut.scrollHeight;
    };
    sock.onclose = () => {
      ws = null;
      termIn.disabled = true;
      termButton.textContent = 'Open terminal';
      termOut.append(h('span', { class: 'meta' }, '[terminal closed]\n'));
    };
  });
  const termForm = h(
    'form',
    {
      class: 'row',
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        if (!ws) return;
        termOut.append(h('span', { class: 'meta' }, `${termIn.value}\n`));
        ws.send(JSON.stringify({ type: 'stdin', data: `${termIn.value}\n` }));
        termIn.value = '';
      },
    },
    h('label', { class: 'grow' }, 'Terminal input (Enter sends a line)', termIn),
    termButton,
  );

  // Files.
  const dirInput = h('input', { id: 'files-dir', value: '/tmp' });
  const fileBody = h('tbody');
  const fileInput = h('input', { id: 'upload', type: 'file', multiple: true });
  const drop = h('div', { class: 'drop', id: 'drop' }, 'Drop files here to upload them into the folder above');
  const listFiles = async () => {
    try {
      const dir = dirInput.value.trim() || '/';
      const items = await getJson<FileInfo[]>(`${path}/files/list?path=${encodeURIComponent(dir)}`);
      items.sort((a, b) => Number(b.is_dir) - Number(a.is_dir) || a.name.localeCompare(b.name));
      fileBody.replaceChildren(
        ...items.map((f) =>
          h(
            'tr',
            { 'data-name': f.name },
            h(
              'td',
              {},
              f.is_dir
                ? h('button', { type: 'button', class: 'link', onclick: () => ((dirInput.value = f.path), void listFiles()) }, `${f.name}/`)
                : h('button', { type: 'button', class: 'link', 'data-download': f.name, onclick: () => void download(f) }, f.name),
            ),
            h('td', {}, f.is_dir ? '' : size(f.size)),
            h('td', { class: 'opt' }, f.mode),
            h('td', { class: 'opt' }, when(f.mod_time)),
          ),
        ),
      );
      if (items.length === 0) fileBody.append(h('tr', {}, h('td', { colspan: '4', class: 'muted' }, 'Empty folder.')));
    } catch (e) {
      fileBody.replaceChildren(h('tr', {}, h('td', { colspan: '4', class: 'err' }, errText(e))));
    }
  };
  const download = async (f: FileInfo) => {
    try {
      const blob = await (await api(`${path}/files?path=${encodeURIComponent(f.path)}`)).blob();
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: f.name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      say(`download failed: ${errText(e)}`, true);
    }
  };
  const upload = async (files: FileList | File[]) => {
    const dir = (dirInput.value.trim() || '/').replace(/\/+$/, '');
    for (const f of Array.from(files)) {
      try {
        say(`uploading ${f.name}…`);
        await api(`${path}/files?path=${encodeURIComponent(`${dir}/${f.name}`)}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: await f.arrayBuffer() });
        say(`uploaded ${f.name} (${size(f.size)})`);
      } catch (e) {
        say(`upload of ${f.name} failed: ${errText(e)}`, true);
      }
    }
    await listFiles();
  };
  fileInput.addEventListener('change', () => {
    if (fileInput.files?.length) void upload(fileInput.files).then(() => (fileInput.value = ''));
  });
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (e.dataTransfer?.files.length) void upload(e.dataTransfer.files);
  });

  // Logs, processes.
  const logsOut = h('pre', { class: 'out', id: 'logs-output' });
  const loadLogs = async () => {
    try {
      const lines = await getJson<string[]>(`${path}/logs?lines=200`);
      logsOut.textContent = lines.join('\n') || '(no console output)';
    } catch (e) {
      logsOut.textContent = errText(e);
    }
  };
  const procBody = h('tbody');
  const loadProcs = async () => {
    try {
      const procs = await getJson<Array<Record<string, unknown>>>(`${path}/processes`);
      procBody.replaceChildren(...procs.map((p) => h('tr', {}, h('td', {}, String(p.pid ?? p.id ?? '')), h('td', {}, String(p.state ?? p.status ?? '')), h('td', {}, [p.command, ...((p.args as string[]) ?? [])].filter(Boolean).join(' ')))));
      if (procs.length === 0) procBody.append(h('tr', {}, h('td', { colspan: '3', class: 'muted' }, 'No background processes.')));
    } catch (e) {
      procBody.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'muted' }, errText(e))));
    }
  };

  const destroy = h('button', {
    type: 'button',
    class: 'danger',
    id: 'destroy',
    onclick: async () => {
      if (!confirm(`Destroy sandbox ${id}?`)) return;
      try {
        await sendJson('DELETE', path);
        say(`destroyed ${id}`);
        location.hash = '#/sandboxes';
      } catch (e) {
        say(`destroy failed: ${errText(e)}`, true);
      }
    },
  }, 'Destroy');
  const snapshot = h('button', {
    type: 'button',
    onclick: async () => {
      const name = prompt('Snapshot name');
      if (!name) return;
      try {
        await sendJson('POST', `${path}/snapshot`, { name });
        say(`snapshot ${name} saved`);
      } catch (e) {
        say(`snapshot failed: ${errText(e)}`, true);
      }
    },
  }, 'Snapshot');

  main.replaceChildren(
    h('p', {}, h('a', { href: '#/sandboxes' }, '← all sandboxes')),
    h('section', { class: 'card' }, h('h2', {}, 'Sandbox ', h('code', { id: 'sandbox-id' }, id)), info, h('div', { class: 'row' }, snapshot, destroy)),
    h('section', { class: 'card' }, h('h2', {}, 'Run a command'), execForm, out),
    h('section', { class: 'card' }, h('h2', {}, 'Terminal'), termForm, termOut),
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Files'),
      h('form', { class: 'row', onsubmit: (e: Event) => (e.preventDefault(), void listFiles()) }, h('label', { class: 'grow' }, 'Folder', dirInput), h('button', { type: 'submit' }, 'List')),
      h('div', { class: 'row' }, h('label', {}, 'Upload files', fileInput)),
      drop,
      h('div', { class: 'table-wrap' }, h('table', { id: 'files' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Size'), h('th', { scope: 'col', class: 'opt' }, 'Mode'), h('th', { scope: 'col', class: 'opt' }, 'Modified'))), fileBody)),
    ),
    h('section', { class: 'card' }, h('h2', {}, 'Console logs ', h('button', { type: 'button', onclick: () => void loadLogs() }, 'Refresh')), logsOut),
    h('section', { class: 'card' }, h('h2', {}, 'Background processes ', h('button', { type: 'button', onclick: () => void loadProcs() }, 'Refresh')), h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'PID'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Command'))), procBody))),
  );
  const refresh = debounce(() => void showInfo(), 150);
  onEvent((e) => {
    if (e.sandbox_id === id) refresh();
  });
  await Promise.all([showInfo(), listFiles(), loadLogs(), loadProcs()]);
}

function eventsView(): void {
  const list = h('ul', { class: 'events', id: 'events' });
  const filter = h('input', { id: 'events-filter', type: 'search', placeholder: 'type or sandbox id' });
  const line = (e: SbxEvent) => h('li', {}, `${new Date(e.timestamp).toLocaleTimeString()}  ${e.type}${e.sandbox_id ? `  ${e.sandbox_id}` : ''}${e.owner_id ? `  owner=${e.owner_id}` : ''}`);
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    list.replaceChildren(...events.filter((e) => !q || e.type.includes(q) || e.sandbox_id?.includes(q)).slice(-200).reverse().map(line));
  };
  filter.addEventListener('input', render);
  main.replaceChildren(h('section', { class: 'card' }, h('h2', {}, 'Events (live)'), h('div', { class: 'row' }, h('label', { class: 'grow' }, 'Filter', filter)), list));
  render();
  onEvent(() => render());
}

/** A generic table of JSON objects: the keys of the first row become the columns. */
function jsonTable(rows: Array<Record<string, unknown>>, columns?: string[]): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'muted' }, 'None.');
  const cols = columns ?? Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ...cols.map((c) => h('th', { scope: 'col' }, c)))), h('tbody', {}, ...rows.map((r) => h('tr', {}, ...cols.map((c) => h('td', {}, cell(r[c]))))))));
}

async function templatesView(): Promise<void> {
  const card = h('section', { class: 'card' }, h('h2', {}, 'Templates'));
  main.replaceChildren(card);
  try {
    const list = await getJson<Array<Record<string, unknown>>>('/templates');
    card.append(jsonTable(list, ['name', 'image', 'provider', 'memory_mb', 'vcpus', 'ttl', 'updated_at']));
  } catch (e) {
    card.append(h('p', { class: 'err' }, errText(e)));
  }
}

async function systemView(): Promise<void> {
  const section = (title: string, id: string) => h('section', { class: 'card', id }, h('h2', {}, title));
  const providers = section('Providers', 'sys-providers');
  const workers = section('Workers', 'sys-workers');
  const quotas = section('Quotas and admission', 'sys-quotas');
  const pool = section('Pool', 'sys-pool');
  const health = section('Health', 'sys-health');
  const snapshots = section('Snapshots', 'sys-snapshots');
  main.replaceChildren(health, providers, workers, quotas, pool, snapshots);
  const fill = async (card: HTMLElement, load: () => Promise<HTMLElement>) => {
    try {
      card.append(await load());
    } catch (e) {
      card.append(h('p', { class: 'muted' }, errText(e)));
    }
  };
  const asRows = (v: unknown): Array<Record<string, unknown>> => (Array.isArray(v) ? v : v && typeof v === 'object' ? Object.values(v as object).find(Array.isArray) ?? [v] : []) as Array<Record<string, unknown>>;
  await Promise.all([
    fill(health, async () => h('pre', { class: 'out' }, JSON.stringify(await getJson('/health'), null, 2))),
    fill(providers, async () => jsonTable(asRows(await getJson('/providers')))),
    fill(workers, async () => jsonTable(asRows(await getJson('/workers')))),
    fill(quotas, async () => h('pre', { class: 'out' }, JSON.stringify(await getJson('/quotas/summary'), null, 2))),
    fill(pool, async () => h('pre', { class: 'out' }, JSON.stringify(await getJson('/pool/status'), null, 2))),
    fill(snapshots, async () => jsonTable(asRows(await getJson('/snapshots')), ['name', 'image', 'provider', 'size_bytes', 'created_at'])),
  ]);
}

// ---------------------------------------------------------------------------------------- start

function start(): void {
  nav.hidden = false;
  say('');
  void runEvents();
  route();
}

nav.addEventListener('click', (e) => {
  const b = (e.target as HTMLElement).closest('button');
  if (!b) return;
  if (b.id === 'logout') {
    sessionStorage.removeItem(KEY_SLOT);
    showLogin();
    return;
  }
  if (b.dataset.view) location.hash = `#/${b.dataset.view}`;
});
window.addEventListener('hashchange', () => {
  if (!nav.hidden) route();
});

void (async () => {
  // An open server (auth off) needs no key; otherwise ask for one unless this tab has it.
  try {
    await getJson('/sandboxes?limit=1');
    start();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) say(errText(e), true);
  }
})();
