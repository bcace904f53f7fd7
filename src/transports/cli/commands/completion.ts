import type { CommandSpec } from '../spec.js';

export const completionCommand: CommandSpec = {
  name: 'completion',
  summary: 'print a shell completion script (bash, zsh, fish)',
  offline: true,
  args: [{ name: 'shell', description: 'bash, zsh or fish', required: true, choices: ['bash', 'zsh', 'fish'] }],
  examples: [
    'source <(sbx completion bash)',
    'sbx completion zsh > "${fpath[1]}/_sbx"',
    'sbx completion fish > ~/.config/fish/completions/sbx.fish',
  ],
  async run(ctx, opts: { shell: 'bash' | 'zsh' | 'fish' }) {
    const [{ COMMANDS }, { GLOBAL_OPTIONS }, gen] = await Promise.all([
      import('../registry.js'),
      import('../program.js'),
      import('../docs/completions.js'),
    ]);
    ctx.out.write(gen.completionScript(opts.shell, COMMANDS, GLOBAL_OPTIONS));
    return 0;
  },
};
