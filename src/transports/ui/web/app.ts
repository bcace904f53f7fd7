/**
 * The sbx dashboard (issue 19): a few small modules, no framework, built on the project's typed
 * client (src/client/browser.ts, the fetch transport) like the CLI is on the Node one. This one
 * holds sign-in, routing and the list views; sandbox-view.ts the view of one sandbox, live.ts the
 * event feed, api.ts the client and the key (sessionStorage, sent as `X-API-Key`, never in a URL).
 */
import type { SbxEvent, SpawnRequest } from '../../../client/browser.js';
import { api, errText, forgetKey, isUnauthorized, onUnauthorized, setKey, type ShownSandbox } from './api.js';
import { debounce, h, jsonTable, main, nav, say, when } from './dom.js';
import { events, leaveView, onEvent, onLeave, runEvents, stopEvents } from './live.js';
import { sandboxView } from './sandbox-view.js';

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
        setKey(input.value.trim());
        try {
          await api().list({ limit: 1 });
          start();
        } catch (e) {
          if (!isUnauthorized(e)) say(errText(e), true);
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
      h(
        'p',
        { class: 'muted' },
        'Enter the server’s API key. It is kept in this tab’s session storage only and sent in the X-API-Key header.',
      ),
      form,
      problem ? h('p', { class: 'err', role: 'alert' }, problem) : null,
    ),
  );
  input.focus();
}
onUnauthorized((message) => showLogin(message));

// -------------------------------------------------------------------------------------- views

function route(): void {
  leaveView();
  const hash = location.hash.replace(/^#\/?/, '');
  const [view = 'sandboxes', arg] = hash.split('/');
  for (const b of nav.querySelectorAll<HTMLButtonElement>('button[data-view]')) {
    if (b.dataset.view === view || (view === 'sandbox' && b.dataset.view === 'sandboxes')) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
  if (view === 'sandbox' && arg) return void sandboxView(decodeURIComponent(arg));
  if (view === 'events') return void eventsView();
  if (view === 'templates') return void templatesView();
  if (view === 'secrets') return void secretsView();
  if (view === 'system') return void systemView();
  return void sandboxesView();
}

async function sandboxesView(): Promise<void> {
  const filter = h('input', { id: 'filter', type: 'search', placeholder: 'id, state, owner, provider, image…' });
  const image = h('input', { id: 'spawn-image', placeholder: 'server default' });
  const ttl = h('input', { id: 'spawn-ttl', placeholder: 'e.g. 30m' });
  const body = h('tbody');
  const count = h('span', { class: 'muted' });
  let list: ShownSandbox[] = [];
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const shown = list.filter(
      (s) => !q || [s.id, s.state, s.owner_id, s.provider, s.image, s.worker_id, s.template].some((v) => v?.toLowerCase().includes(q)),
    );
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
    if (shown.length === 0)
      body.append(
        h('tr', {}, h('td', { colspan: '7', class: 'muted' }, list.length ? 'No sandbox matches the filter.' : 'No sandboxes yet.')),
      );
  };
  const load = async () => {
    try {
      list = await api().list();
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
        const req: SpawnRequest = {};
        if (image.value.trim()) req.image = image.value.trim();
        if (ttl.value.trim()) req.ttl = ttl.value.trim();
        say('spawning…');
        try {
          const s = await api().spawn(req);
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
  const head = h(
    'tr',
    {},
    ...['ID', 'State', 'Owner', 'Provider'].map((t) => h('th', { scope: 'col' }, t)),
    h('th', { scope: 'col', class: 'opt' }, 'Worker'),
    h('th', { scope: 'col', class: 'opt' }, 'Image'),
    h('th', { scope: 'col' }, 'Expires'),
  );
  main.replaceChildren(
    h('section', { class: 'card' }, h('h2', {}, 'New sandbox'), spawnForm),
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Sandboxes ', count),
      h('div', { class: 'row' }, h('label', { class: 'grow' }, 'Filter', filter)),
      h('div', { class: 'table-wrap' }, h('table', { id: 'sandboxes' }, h('thead', {}, head), body)),
    ),
  );
  const reload = debounce(() => void load(), 150); // load reports its own errors
  onLeave(reload.cancel);
  onEvent((e) => {
    if (e.type.startsWith('sandbox.')) reload();
  });
  await load();
}

function eventsView(): void {
  const list = h('ul', { class: 'events', id: 'events' });
  const filter = h('input', { id: 'events-filter', type: 'search', placeholder: 'type or sandbox id' });
  const line = (e: SbxEvent) =>
    h(
      'li',
      {},
      `${new Date(e.timestamp).toLocaleTimeString()}  ` +
        `${e.type}${e.sandbox_id ? `  ${e.sandbox_id}` : ''}${e.owner_id ? `  owner=${e.owner_id}` : ''}`,
    );
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    list.replaceChildren(
      ...events
        .filter((e) => !q || e.type.includes(q) || e.sandbox_id?.includes(q))
        .slice(-200)
        .reverse()
        .map(line),
    );
  };
  filter.addEventListener('input', render);
  main.replaceChildren(
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Events (live)'),
      h('div', { class: 'row' }, h('label', { class: 'grow' }, 'Filter', filter)),
      list,
    ),
  );
  render();
  onEvent(() => render());
}

type Rows = Array<Record<string, unknown>>;

async function templatesView(): Promise<void> {
  const card = h('section', { class: 'card' }, h('h2', {}, 'Templates'));
  main.replaceChildren(card);
  try {
    const list = (await api().templates.list()) as unknown as Rows;
    card.append(jsonTable(list, ['name', 'image', 'provider', 'memory_mb', 'vcpus', 'ttl', 'updated_at']));
  } catch (e) {
    card.append(h('p', { class: 'err' }, errText(e)));
  }
}

/** Secrets (DESIGN.md §15): names, hosts and fingerprints only — the API never answers a value. */
async function secretsView(): Promise<void> {
  const card = h('section', { class: 'card' }, h('h2', {}, 'Secrets'));
  main.replaceChildren(card);
  try {
    const list = (await api().secrets.list()) as unknown as Rows;
    if (list.length === 0) card.append(h('p', { class: 'muted' }, 'No secrets (sbx secrets set NAME --host HOST).'));
    else card.append(jsonTable(list, ['name', 'owner_id', 'hosts', 'allow_plain_http', 'fingerprint', 'updated_at']));
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
  const pre = (v: unknown) => h('pre', { class: 'out' }, JSON.stringify(v, null, 2));
  const rows = (v: unknown[]) => v as Rows;
  const sbx = api();
  await Promise.all([
    fill(health, async () => pre(await sbx.health())),
    fill(providers, async () => jsonTable(rows(await sbx.providers.list()))),
    fill(workers, async () => jsonTable(rows(await sbx.workers.list()))),
    fill(quotas, async () => pre(await sbx.quotas.summary())),
    fill(pool, async () => pre(await sbx.poolStatus())),
    fill(snapshots, async () => jsonTable(rows(await sbx.snapshots()), ['name', 'image', 'provider', 'size_bytes', 'created_at'])),
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
    forgetKey();
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
    await api().list({ limit: 1 });
    start();
  } catch (e) {
    if (!isUnauthorized(e)) say(errText(e), true);
  }
})();
