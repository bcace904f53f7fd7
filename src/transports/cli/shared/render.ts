/** Human renderings shared by several commands. */
import type { Sandbox, Template } from '../../../client/types.js';
import type { Output } from '../output/output.js';
import { dash, labels, relativeTime } from '../output/format.js';
import type { Column } from '../output/table.js';

/** Colours a sandbox state: running green, unhealthy yellow, anything else red. */
export function stateStyle(out: Output): (text: string, row: { state: string }) => string {
  return (text, row) =>
    row.state === 'running'
      ? out.c.green(text)
      : row.state === 'unhealthy' || row.state === 'paused'
        ? out.c.yellow(text)
        : out.c.red(text);
}

/** Columns of `sbx ls`. */
export function sandboxColumns(out: Output, now = Date.now()): Column<Sandbox>[] {
  return [
    { header: 'ID', value: (s) => s.id },
    { header: 'STATE', value: (s) => s.state, style: stateStyle(out) },
    { header: 'PROVIDER', value: (s) => s.provider },
    { header: 'IMAGE', value: (s) => s.image },
    { header: 'OWNER', value: (s) => dash(s.owner_id) },
    { header: 'EXPIRES', value: (s) => relativeTime(s.expires_at, now) },
    { header: 'METADATA', value: (s) => labels(s.metadata) },
  ];
}

/** `key: value` block describing one sandbox. */
export function printSandbox(out: Output, s: Sandbox): void {
  out.fields([
    ['id', s.id],
    ['state', s.state],
    ['provider', s.provider],
    ['image', s.image],
    ['memory', `${s.memory_mb} MB`],
    ['vcpus', String(s.vcpus)],
    ['owner', dash(s.owner_id)],
    ['worker', dash(s.worker_id)],
    ['created', s.created_at],
    ['expires', `${s.expires_at} (${relativeTime(s.expires_at)})`],
    ['metadata', labels(s.metadata)],
    ...(s.template ? [['template', s.template] as const] : []),
    ...(s.snapshot ? [['snapshot', s.snapshot] as const] : []),
    ...(s.volumes?.length ? [['volumes', s.volumes.map((v) => `${v.name}:${v.mount_path}`).join(', ')] as const] : []),
    ...(s.preview_domain ? [['preview', `<port>-${s.id}.${s.preview_domain}`] as const] : []),
  ]);
}

/**
 * After a spawn: the id alone when stdout is not a terminal (`ID=$(sbx spawn)`), the API JSON
 * with --json, a summary otherwise.
 */
export function printSpawned(out: Output, s: Sandbox): void {
  if (out.json) return out.printJson(s);
  if (!out.isTTY) return out.line(s.id);
  out.line(`${out.c.green('✔')} spawned ${out.c.bold(s.id)}`);
  printSandbox(out, s);
}

/** Columns of `sbx templates ls`. */
export function templateColumns(): Column<Template>[] {
  return [
    { header: 'NAME', value: (t) => t.name },
    { header: 'IMAGE', value: (t) => dash(t.image) },
    { header: 'PROVIDER', value: (t) => dash(t.provider) },
    { header: 'MEMORY', value: (t) => (t.memory_mb ? `${t.memory_mb} MB` : '-') },
    { header: 'VCPUS', value: (t) => dash(t.vcpus) },
    { header: 'TTL', value: (t) => dash(t.ttl) },
    { header: 'METADATA', value: (t) => labels(t.metadata) },
  ];
}

/** `key: value` block describing one template. */
export function printTemplate(out: Output, t: Template): void {
  out.fields([
    ['name', t.name],
    ['image', dash(t.image)],
    ['provider', dash(t.provider)],
    ['memory', t.memory_mb ? `${t.memory_mb} MB` : '-'],
    ['vcpus', dash(t.vcpus)],
    ['ttl', dash(t.ttl)],
    ['metadata', labels(t.metadata)],
    ...(t.snapshot ? [['snapshot', t.snapshot] as const] : []),
    ...(t.volumes?.length ? [['volumes', t.volumes.map((v) => `${v.name}:${v.mount_path}`).join(', ')] as const] : []),
    ...(t.warm ? [['warm', String(t.warm)] as const] : []),
    ['created', t.created_at],
    ['updated', t.updated_at],
  ]);
}
