/** One sandbox: its facts, a streamed command, a terminal, preview links, files, console logs, background processes. */
import type { FileInfo } from '../../../client/browser.js';
import { api, errText, type ShownSandbox } from './api.js';
import { debounce, h, main, say, size, when } from './dom.js';
import { onEvent, onLeave } from './live.js';
import { previewCard } from './preview.js';
import { terminalCard } from './terminal.js';

export async function sandboxView(id: string): Promise<void> {
  // Once destroyed (here or elsewhere) the view asks nothing more about the sandbox.
  let gone = false;
  const info = h('dl', { class: 'row' });
  // Reads can answer out of order (the first one beside the view's other loads, a refresh after an
  // event): only the newest read is shown, so a stale `running` never covers a later `paused`.
  let reads = 0;
  const showInfo = async () => {
    if (gone) return;
    const read = ++reads;
    try {
      const s: ShownSandbox = await api().get(id);
      if (read !== reads || gone) return;
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
      preview.show(s);
      info.replaceChildren(
        ...pairs.flatMap(([k, v]) => [
          h(
            'div',
            {},
            h('dt', { class: 'muted' }, k),
            h('dd', { class: k === 'State' ? `state state-${v}` : '', 'data-field': k.toLowerCase() }, v),
          ),
        ]),
      );
    } catch (e) {
      if (read === reads) info.replaceChildren(h('p', { class: 'err' }, errText(e)));
    }
  };
  const preview = previewCard(id);
  const files = filesCard(id);
  const logs = logsCard(id);
  const procs = processesCard(id);
  // Destroy waits for the view's first reads, so none of them lands after the sandbox is gone.
  const destroy = destroyButton(id, (pending) => {
    gone = pending;
    if (pending) refresh.cancel();
  });
  destroy.disabled = true;
  // Pause and Resume too: a first read still on its way (the file list, its watch, the processes)
  // would resume the sandbox right after a pause, as any file or process call does (DESIGN.md §16).
  const pausing = pauseButtons(id);
  for (const b of pausing) b.disabled = true;
  main.replaceChildren(
    h('p', {}, h('a', { href: '#/sandboxes' }, '← all sandboxes')),
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Sandbox ', h('code', { id: 'sandbox-id' }, id)),
      info,
      h('div', { class: 'row' }, snapshotButton(id), ...pausing, destroy),
    ),
    execCard(id),
    terminalCard(id),
    preview.card,
    files.card,
    logs.card,
    procs.card,
  );
  const refresh = debounce(() => void showInfo(), 150);
  onLeave(refresh.cancel);
  onEvent((e) => {
    if (e.sandbox_id !== id) return;
    if (e.type === 'sandbox.destroyed') {
      gone = true;
      refresh.cancel();
      info.querySelector('[data-field="state"]')?.replaceChildren('destroyed');
    } else refresh();
  });
  await Promise.all([showInfo(), files.load(), logs.load(), procs.load()]);
  destroy.disabled = false;
  for (const b of pausing) b.disabled = false;
}

/** Exec console: the client's streamed exec, output shown as it comes, then the exit record. */
function execCard(id: string): HTMLElement {
  const cmd = h('input', { id: 'exec-command', placeholder: 'echo hello', autocomplete: 'off', spellcheck: false });
  const out = h('pre', { class: 'out', id: 'exec-output', 'aria-live': 'polite' });
  let execAbort: AbortController | null = null;
  onLeave(() => execAbort?.abort());
  const append = (cls: string, text: string) => out.append(h('span', { class: cls }, text));
  const form = h(
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
          for await (const chunk of api().execStream(id, { command }, { signal: ctl.signal })) {
            if (chunk.stream === 'exit') append('meta', `[exit ${chunk.exit_code}${chunk.duration ? ` in ${chunk.duration}` : ''}]\n`);
            else append(chunk.stream, chunk.data);
            out.scrollTop = out.scrollHeight;
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
  return h('section', { class: 'card' }, h('h2', {}, 'Run a command'), form, out);
}

/**
 * Files: list a folder, download (raw bytes), upload from the picker or by drag and drop (raw
 * bytes). The folder shown is watched (DESIGN §16, not recursive): the list refreshes by itself
 * when it changes; where no watch can be had (501, 429) the List button still works.
 */
function filesCard(id: string): { card: HTMLElement; load: () => Promise<void> } {
  const dirInput = h('input', { id: 'files-dir', value: '/tmp' });
  const fileBody = h('tbody');
  const fileInput = h('input', { id: 'upload', type: 'file', multiple: true });
  const drop = h('div', { class: 'drop', id: 'drop' }, 'Drop files here to upload them into the folder above');
  let watched: { dir: string; ctl: AbortController } | null = null;
  const reload = debounce(() => void load(), 100);
  onLeave(() => {
    watched?.ctl.abort();
    reload.cancel();
  });
  const follow = (dir: string) => {
    if (watched?.dir === dir) return;
    watched?.ctl.abort();
    const ctl = new AbortController();
    watched = { dir, ctl };
    void (async () => {
      try {
        for await (const _ of api().watchFiles(id, dir, { recursive: false, signal: ctl.signal })) reload();
      } catch {
        // No live refresh for this folder (a provider without watch, the sandbox's watches in use).
      }
      if (watched?.ctl === ctl) watched = null;
    })();
  };
  const load = async () => {
    try {
      const dir = dirInput.value.trim() || '/';
      const items = await api().files.list(id, dir);
      follow(dir);
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
                ? h('button', { type: 'button', class: 'link', onclick: () => ((dirInput.value = f.path), void load()) }, `${f.name}/`)
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
      const bytes = await api().files.read(id, f.path);
      const url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }));
      const a = h('a', { href: url, download: f.name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      say(`download failed: ${errText(e)}`, true);
    }
  };
  const upload = async (list: FileList | File[]) => {
    const dir = (dirInput.value.trim() || '/').replace(/\/+$/, '');
    for (const f of Array.from(list)) {
      try {
        say(`uploading ${f.name}…`);
        await api().files.write(id, `${dir}/${f.name}`, new Uint8Array(await f.arrayBuffer()));
        say(`uploaded ${f.name} (${size(f.size)})`);
      } catch (e) {
        say(`upload of ${f.name} failed: ${errText(e)}`, true);
      }
    }
    await load();
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
  const card = h(
    'section',
    { class: 'card' },
    h('h2', {}, 'Files'),
    h(
      'form',
      { class: 'row', onsubmit: (e: Event) => (e.preventDefault(), void load()) },
      h('label', { class: 'grow' }, 'Folder', dirInput),
      h('button', { type: 'submit' }, 'List'),
    ),
    h('div', { class: 'row' }, h('label', {}, 'Upload files', fileInput)),
    drop,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { id: 'files' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, 'Name'),
            h('th', { scope: 'col' }, 'Size'),
            h('th', { scope: 'col', class: 'opt' }, 'Mode'),
            h('th', { scope: 'col', class: 'opt' }, 'Modified'),
          ),
        ),
        fileBody,
      ),
    ),
  );
  return { card, load };
}

function logsCard(id: string): { card: HTMLElement; load: () => Promise<void> } {
  const out = h('pre', { class: 'out', id: 'logs-output' });
  const load = async () => {
    try {
      out.textContent = (await api().logs(id, 200)).join('\n') || '(no console output)';
    } catch (e) {
      out.textContent = errText(e);
    }
  };
  return {
    card: h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Console logs ', h('button', { type: 'button', onclick: () => void load() }, 'Refresh')),
      out,
    ),
    load,
  };
}

function processesCard(id: string): { card: HTMLElement; load: () => Promise<void> } {
  const body = h('tbody');
  const load = async () => {
    try {
      const procs = await api().processes.list(id);
      body.replaceChildren(
        ...procs.map((p) =>
          h('tr', {}, h('td', {}, p.id), h('td', {}, p.state), h('td', {}, [p.command, ...p.args].filter(Boolean).join(' '))),
        ),
      );
      if (procs.length === 0) body.append(h('tr', {}, h('td', { colspan: '3', class: 'muted' }, 'No background processes.')));
    } catch (e) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: '3', class: 'muted' }, errText(e))));
    }
  };
  const table = h(
    'table',
    {},
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'PID'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Command'))),
    body,
  );
  return {
    card: h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Background processes ', h('button', { type: 'button', onclick: () => void load() }, 'Refresh')),
      h('div', { class: 'table-wrap' }, table),
    ),
    load,
  };
}

/** `destroying(true)` as the request leaves, `destroying(false)` when it failed. */
function destroyButton(id: string, destroying: (pending: boolean) => void): HTMLButtonElement {
  const onclick = async () => {
    if (!confirm(`Destroy sandbox ${id}?`)) return;
    destroying(true);
    try {
      await api().destroy(id);
      say(`destroyed ${id}`);
      location.hash = '#/sandboxes';
    } catch (e) {
      destroying(false);
      say(`destroy failed: ${errText(e)}`, true);
    }
  };
  return h('button', { type: 'button', class: 'danger', id: 'destroy', onclick }, 'Destroy');
}

/** Pause and Resume (DESIGN.md §16); the view's state follows the `sandbox.paused` / `sandbox.resumed` events. */
function pauseButtons(id: string): HTMLButtonElement[] {
  const act = (verb: 'pause' | 'resume') => async () => {
    try {
      const s = verb === 'pause' ? await api().pause(id) : await api().resume(id);
      say(`${id} ${s.state}`);
    } catch (e) {
      say(`${verb} failed: ${errText(e)}`, true);
    }
  };
  return [
    h('button', { type: 'button', id: 'pause', onclick: act('pause') }, 'Pause'),
    h('button', { type: 'button', id: 'resume', onclick: act('resume') }, 'Resume'),
  ];
}

function snapshotButton(id: string): HTMLElement {
  const onclick = async () => {
    const name = prompt('Snapshot name');
    if (!name) return;
    try {
      await api().snapshot(id, name);
      say(`snapshot ${name} saved`);
    } catch (e) {
      say(`snapshot failed: ${errText(e)}`, true);
    }
  };
  return h('button', { type: 'button', onclick }, 'Snapshot');
}
