import { sandboxColumns } from '../shared/render.js';
import type { CommandSpec } from '../spec.js';

export const lsCommand: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list live sandboxes',
  options: [{ flags: '-q, --quiet', description: 'print only the ids' }],
  async run(ctx, opts: { quiet?: boolean }) {
    // Page by page: a fleet of any size arrives in bounded answers.
    const collect = async () => {
      const out = [];
      for await (const s of ctx.client.listAll({ signal: ctx.signal })) out.push(s);
      return out;
    };
    const items = await ctx.out.spin('listing sandboxes', collect());
    if (ctx.out.json) return (ctx.out.printJson(items), 0);
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
