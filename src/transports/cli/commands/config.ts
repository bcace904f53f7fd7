import { ExitError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { CommandSpec } from '../spec.js';

const lint: CommandSpec = {
  name: 'lint',
  summary: 'check the server configuration for security and consistency problems',
  description:
    'Loads the configuration exactly as `sbx serve` would and prints every finding with its fix.\nExit 1 when ' +
    'a finding fails (with --production, exposure warnings fail); exit 3 when it does not load.',
  offline: true,
  options: [
    { flags: '--production', description: 'production rules: auth off, open CORS, weak keys, unverified TLS fail' },
    { flags: '-c, --config <file>', description: 'config file (env SBX_CONFIG)', complete: 'file' },
  ],
  async run(ctx, opts: { production?: boolean; config?: string }) {
    const { loadConfig, lintConfig } = await import('../../../config/index.js');
    const { config, sources } = await loadConfig({ file: opts.config, env: ctx.env, cwd: ctx.cwd, home: ctx.home });
    const findings = lintConfig(config, { production: Boolean(opts.production) });
    const failed = findings.some((f) => f.level === 'fail');
    const { out } = ctx;
    if (out.json) {
      out.printJson({ ok: !failed, sources, findings });
    } else {
      out.note(`config from: ${sources.join(', ')}`);
      for (const f of findings) {
        const tag = f.level === 'fail' ? out.c.red('FAIL') : out.c.yellow('WARN');
        out.line(`${tag} ${out.c.bold(f.key)}: ${f.message}`);
        out.line(`     fix: ${f.fix}`);
      }
      const fails = findings.filter((f) => f.level === 'fail').length;
      const warns = findings.length - fails;
      out.line(
        findings.length === 0
          ? out.c.green('no findings')
          : `${fails} failure${fails === 1 ? '' : 's'}, ${warns} warning${warns === 1 ? '' : 's'}`,
      );
    }
    if (failed) throw new ExitError(EXIT.failure);
    return 0;
  },
};

export const configCommand: CommandSpec = {
  name: 'config',
  summary: 'server configuration tools: lint',
  subcommands: [lint],
};
