import { sandboxColumns } from '../shared/render.js';
import type { CommandSpec } from '../spec.js';

export const lsCommand: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list live sandboxes',
  options: [{ flags: '-q, --quiet', description: 'print only the ids' }],
  async run(ctx, opts: { quiet?: boolean }) {
    const items = await ctx.out.spin('listing sandboxes', ctx.client.list({ signal: ctx.signal }));
    if (ctx.out.json) return ctx.out.printJson(items), 0;
    if (opts.quiet) {
      for (const s of items) ctx.out.line(s.id);
      return 0;
    }
    if (items.length === 0) {
      ctx.out.note('no sandboxes');
      return 0;
    }
    ctx.out.table(sandboxColumns(ctx.out), items);
    return 0;
  },
};
