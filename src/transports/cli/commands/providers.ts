import { SbxError } from '../../../contracts/errors.js';
import { dash, relativeTime } from '../output/format.js';
import type { CommandSpec } from '../spec.js';

export const providersCommand: CommandSpec = {
  name: 'providers',
  summary: 'list providers and their health, show one, or run health checks (--test)',
  args: [{ name: 'name', description: 'provider name for details' }],
  options: [{ flags: '--test', description: 'run health checks now; exit 1 when one is unhealthy' }],
  async run(ctx, opts: { name?: string; test?: boolean }) {
    const { out, client } = ctx;
    if (opts.test) {
      const results = await out.spin('checking providers', client.providers.test({ signal: ctx.signal }));
      if (opts.name !== undefined && !Object.hasOwn(results, opts.name)) {
        // The same answer as `sbx providers NAME`: an unknown name is not an empty result.
        const known = Object.keys(results).sort();
        throw new SbxError('not_found', `provider "${opts.name}" is not configured (available: ${known.join(', ') || 'none'})`);
      }
      const entries = Object.entries(results).filter(([name]) => !opts.name || name === opts.name);
      if (out.json) out.printJson(Object.fromEntries(entries));
      else
        out.table(
          [
            { header: 'PROVIDER', value: ([n]: [string, boolean]) => n },
            {
              header: 'HEALTH',
              value: ([, ok]: [string, boolean]) => (ok ? 'ok' : 'failed'),
              style: (t: string, [, ok]: [string, boolean]) => (ok ? out.c.green(t) : out.c.red(t)),
            },
          ],
          entries,
        );
      return entries.every(([, ok]) => ok) ? 0 : 1;
    }
    if (opts.name) {
      const p = await client.providers.get(opts.name, { signal: ctx.signal });
      if (out.json) out.printJson(p);
      else
        out.fields([
          ['name', p.name],
          ['healthy', p.healthy ? out.c.green('yes') : out.c.red(`no${p.health.error ? ` (${p.health.error})` : ''})`)],
          ['default', p.default ? 'yes' : 'no'],
          ['sandboxes', String(p.sandbox_count)],
          ['latency', `${p.health.latency_ms} ms`],
          ['capabilities', p.health.capabilities.join(', ') || '-'],
          ...Object.entries(p.config ?? {}).map(([k, v]) => [`config.${k}`, typeof v === 'string' ? v : JSON.stringify(v)] as const),
        ]);
      return 0;
    }
    const items = await client.providers.list({ signal: ctx.signal });
    if (out.json) out.printJson(items);
    else
      out.table(
        [
          { header: 'NAME', value: (p) => `${p.name}${p.default ? ' *' : ''}` },
          { header: 'HEALTHY', value: (p) => (p.healthy ? 'yes' : 'no'), style: (t, p) => (p.healthy ? out.c.green(t) : out.c.red(t)) },
          { header: 'LATENCY', value: (p) => `${p.latency_ms}ms`, align: 'right' },
          { header: 'CHECKED', value: (p) => relativeTime(p.last_checked) },
          { header: 'RUNTIMES', value: (p) => dash(p.runtime_count) },
          { header: 'CAPABILITIES', value: (p) => p.capabilities.join(',') },
          { header: 'ERROR', value: (p) => dash(p.error) },
        ],
        items,
      );
    return 0;
  },
};
