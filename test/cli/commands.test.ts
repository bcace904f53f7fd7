import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docFiles } from '../../src/transports/cli/docs/files.js';
import { allCommands } from '../../src/transports/cli/registry.js';
import { runSbx } from './run-sbx.js';
import { tempDir } from '../helpers/tmp.js';

const root = join(import.meta.dirname, '..', '..');
const commandsDir = join(root, 'src', 'transports', 'cli', 'commands');
const camel = (file: string) => file.replace(/\.ts$/, '').replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

/** With SBX_TEST_SHELLS=1 (set by .ci/run) the shell suites are mandatory and fail when a shell is missing. */
function shellPresent(shell: string): boolean {
  return process.env.SBX_TEST_SHELLS === '1' || spawnSync(shell, ['--version']).error === undefined;
}

describe('command tree guard', () => {
  it('every command file exports <verb>Command and is registered', async () => {
    const files = readdirSync(commandsDir).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThanOrEqual(18);
    for (const file of files) {
      const mod = (await import(join(commandsDir, file))) as Record<string, unknown>;
      const spec = mod[`${camel(file)}Command`];
      expect(spec, `${file} exports ${camel(file)}Command`).toBeTruthy();
      expect(
        allCommands().map((c) => c.spec),
        `${file} is in the registry`,
      ).toContain(spec);
    }
  });

  it('every command and subcommand renders its help', async () => {
    for (const { path, spec } of allCommands()) {
      const r = await runSbx([...path, '--help']);
      expect({ path, code: r.code, stderr: r.stderr }).toEqual({ path, code: 0, stderr: '' });
      expect(r.stdout).toContain(`Usage: sbx ${path.join(' ')}`);
      expect(r.stdout).toContain(spec.summary.slice(0, 40));
      if (spec.run === undefined) expect(spec.subcommands?.length, `${path.join(' ')} has a handler or subcommands`).toBeGreaterThan(0);
      for (const o of spec.options ?? []) expect(r.stdout).toContain(o.flags.split(' ')[0]!.replace(/,$/, ''));
    }
  });

  it('help text is stable', async () => {
    expect((await runSbx(['--help'])).stdout).toMatchSnapshot();
    expect((await runSbx(['exec', '--help'])).stdout).toMatchSnapshot();
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    const r = await runSbx(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('no command, a group without a subcommand, or a bad argument exit 2', async () => {
    expect((await runSbx([])).code).toBe(2);
    const files = await runSbx(['files']);
    expect(files.code).toBe(2);
    expect(files.stderr).toContain('Usage: sbx files');
    const shell = await runSbx(['completion', 'tcsh']);
    expect(shell.code).toBe(2);
    expect(shell.stderr).toMatch(/^sbx: .*tcsh.*\n$/);
    const extra = await runSbx(['get', 'a', 'b']);
    expect(extra.code).toBe(2);
  });
});

describe('generated docs', () => {
  it('completions/ and man/sbx.1 match the command tree (run `npm run gen:docs` after changing commands)', () => {
    for (const [rel, content] of Object.entries(docFiles())) {
      let current = '';
      try {
        current = readFileSync(join(root, rel), 'utf8');
      } catch {
        current = '<missing>';
      }
      expect(current === content, `${rel} is out of date: run \`npm run build && npm run gen:docs\``).toBe(true);
    }
  });

  it('sbx completion prints the same scripts', async () => {
    const files = docFiles();
    expect((await runSbx(['completion', 'bash'])).stdout).toBe(files['completions/sbx.bash']);
    expect((await runSbx(['completion', 'zsh'])).stdout).toBe(files['completions/_sbx']);
    expect((await runSbx(['completion', 'fish'])).stdout).toBe(files['completions/sbx.fish']);
  });

  it('the man page has per-command sections, EXIT STATUS and ENVIRONMENT, and renders', () => {
    const man = docFiles()['man/sbx.1']!;
    for (const { path, spec } of allCommands()) if (spec.run) expect(man).toContain(`.SS "sbx ${path.join(' ').replace(/-/g, '\\-')}`);
    expect(man).toContain('.SH EXIT STATUS');
    expect(man).toContain('.SH ENVIRONMENT');
    expect(man).toContain('SBX_API_KEY');
    const dir = tempDir('sbx-man-');
    writeFileSync(join(dir, 'sbx.1'), man);
    const r = spawnSync('groff', ['-man', '-Tutf8', '-ww', join(dir, 'sbx.1')], { encoding: 'utf8' });
    if (r.error) return; // groff is not installed: the text assertions above still ran.
    expect(r.stderr).toBe('');
    // Bold is rendered as overstrike (X\bX); strip it before reading the text.
    expect(r.stdout.replace(/.\x08/g, '')).toContain('EXIT STATUS');
  });

  it('bash completion completes commands, subcommands, options and option values', () => {
    const script = docFiles()['completions/sbx.bash']!;
    const complete = (words: string[]) => {
      const line = words.map((w) => `'${w}'`).join(' ');
      const r = spawnSync(
        'bash',
        ['-c', `${script}\nCOMP_WORDS=(${line}); COMP_CWORD=${words.length - 1}; _sbx; printf '%s\\n' "\${COMPREPLY[@]}"`],
        { encoding: 'utf8' },
      );
      expect(r.stderr).toBe('');
      return r.stdout.split('\n').filter(Boolean);
    };
    expect(complete(['sbx', 'sp'])).toEqual(['spawn']);
    expect(complete(['sbx', 'files', ''])).toEqual(
      expect.arrayContaining(['ls', 'cat', 'put', 'get', 'rm', 'mv', 'chmod', 'stat', 'glob']),
    );
    expect(complete(['sbx', '--url', 'http://x', 'files', 'p'])).toEqual(['put']);
    expect(complete(['sbx', 'exec', '--ti'])).toEqual(['--timeout']);
    expect(complete(['sbx', 'completion', ''])).toEqual(['bash', 'zsh', 'fish']);
    expect(complete(['sbx', 'quota', 'set', '--max-'])).toEqual(['--max-sandboxes', '--max-ttl', '--max-exec-timeout']);
  });

  it.skipIf(!shellPresent('zsh'))('zsh completion parses (skipped when zsh is absent and SBX_TEST_SHELLS is not 1)', () => {
    const dir = tempDir('sbx-zsh-');
    writeFileSync(join(dir, '_sbx'), docFiles()['completions/_sbx']!);
    const r = spawnSync('zsh', ['-n', join(dir, '_sbx')], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it.skipIf(!shellPresent('fish'))(
    'fish completion parses and completes (skipped when fish is absent and SBX_TEST_SHELLS is not 1)',
    () => {
      const dir = tempDir('sbx-fish-');
      const file = join(dir, 'sbx.fish');
      writeFileSync(file, docFiles()['completions/sbx.fish']!);
      const r = spawnSync('fish', ['--no-config', '-c', `source ${file}; complete -C 'sbx files p'`], {
        encoding: 'utf8',
        env: { ...process.env, HOME: dir },
      });
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/^put\t/m);
    },
  );
});
