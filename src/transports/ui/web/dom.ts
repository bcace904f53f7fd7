/** DOM helpers of the dashboard: the page's fixed elements, an element builder, formatting. */
export const main = document.getElementById('main') as HTMLElement;
export const statusLine = document.getElementById('status') as HTMLElement;
export const nav = document.getElementById('nav') as HTMLElement;

export function say(text: string, bad = false): void {
  statusLine.textContent = text;
  statusLine.className = bad ? 'err' : '';
}

/** Tiny element builder: h('button', {type: 'button', onclick}, 'text'). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, unknown> = {},
  ...children: Array<Node | string | null | undefined>
): HTMLElementTagNameMap[K] {
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

export const when = (iso: string | undefined): string => (iso ? new Date(iso).toLocaleString() : '');
export const size = (n: number): string =>
  n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;

/** `fn` once calls stop coming for `ms`; `cancel()` drops a pending call (a view that went away). */
export function debounce(fn: () => void, ms: number): (() => void) & { cancel(): void } {
  let t: ReturnType<typeof setTimeout> | undefined;
  const call = () => {
    clearTimeout(t);
    t = setTimeout(fn, ms);
  };
  return Object.assign(call, { cancel: () => clearTimeout(t) });
}

/** A generic table of JSON objects: the keys of the first row become the columns. */
export function jsonTable(rows: Array<Record<string, unknown>>, columns?: string[]): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'muted' }, 'None.');
  const cols = columns ?? Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, ...cols.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ...rows.map((r) => h('tr', {}, ...cols.map((c) => h('td', {}, cell(r[c])))))),
    ),
  );
}
