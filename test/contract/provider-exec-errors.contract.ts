import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecEvent, ExecSpec, Provider } from '../../src/core/ports/index.js';
import type { ProviderFixture } from './provider.contract.js';
import { collect, never, within } from './provider-contract-helpers.js';

/**
 * DESIGN §5 "Command not found": a command that does not exist is an exec result with exit code
 * 127 and stderr exactly `sbx: command not found: NAME\n`; one that cannot be executed is 126 and
 * `sbx: permission denied: NAME\n`. Buffered (drained) and streamed (event by event) alike: both
 * come from the provider's exec iterator.
 */
export interface ExecErrorsOptions {
  /** The provider gives the exact messages in shell mode too when the command is one plain word. */
  exactShell?: boolean;
}

export function runExecErrorsContract(name: string, factory: () => Promise<ProviderFixture>, options: ExecErrorsOptions = {}): void {
  describe(`Provider exec errors: ${name}`, () => {
    let fx: ProviderFixture | undefined;
    let p: Provider;
    let rid: string;

    const argv = (command: string, args: string[] = []): ExecSpec => ({ command, args, mode: 'argv', env: {}, workdir: '/workspace' });
    const run = (spec: ExecSpec) => within(collect(p.exec(rid, spec, never)), 15_000, `exec ${spec.command}`);

    beforeAll(async () => {
      fx = await factory();
      p = fx.provider;
      const sandbox_id = `sb-ee${randomBytes(5).toString('hex')}`;
      rid = (await p.spawn({ sandbox_id, image: fx.image, memory_mb: 256, vcpus: 1, metadata: {}, owner_id: null })).runtime_id;
      await p.writeFile(rid, '/workspace/plain.txt', Buffer.from('echo no\n'), 0o644);
      await p.writeFile(rid, '/workspace/bin/tool', Buffer.from('#!/bin/sh\necho tool-ran\n'), 0o755);
    });
    afterAll(async () => {
      if (rid) await p?.destroy(rid).catch(() => undefined);
      await p?.close?.();
      await fx?.cleanup();
    });

    it('argv mode: a missing command is 127 with the exact message (buffered)', async () => {
      const res = await run(argv('sbx-no-such-command-xyz', ['a', 'b']));
      expect(res).toMatchObject({ exitCode: 127, stdout: '', stderr: 'sbx: command not found: sbx-no-such-command-xyz\n' });
      const path = await run(argv('./no/such/prog'));
      expect(path).toMatchObject({ exitCode: 127, stdout: '', stderr: 'sbx: command not found: ./no/such/prog\n' });
    });

    it('argv mode: a missing command streams its stderr chunk before the exit event', async () => {
      const events: ExecEvent[] = [];
      const iter = p.exec(rid, argv('sbx-missing-streamed'), never)[Symbol.asyncIterator]();
      for (;;) {
        const r = await within(iter.next(), 15_000, 'streamed exec');
        if (r.done) break;
        events.push(r.value);
      }
      const last = events[events.length - 1];
      expect(last).toEqual({ stream: 'exit', exit_code: 127 });
      const stderr = Buffer.concat(events.flatMap((e) => (e.stream === 'stderr' ? [Buffer.from(e.data)] : []))).toString();
      expect(stderr).toBe('sbx: command not found: sbx-missing-streamed\n');
      expect(events.some((e) => e.stream === 'stdout')).toBe(false);
    });

    it('argv mode: a file that cannot be executed is 126 (buffered and streamed)', async () => {
      // Relative paths: the workdir is the sandbox's /workspace for every provider (mock commands see host paths).
      expect(await run(argv('./plain.txt'))).toMatchObject({ exitCode: 126, stdout: '', stderr: 'sbx: permission denied: ./plain.txt\n' });
      expect(await run(argv('./bin'))).toMatchObject({ exitCode: 126, stderr: 'sbx: permission denied: ./bin\n' });
      const events: ExecEvent[] = [];
      for await (const ev of p.exec(rid, argv('bin/../plain.txt'), never)) events.push(ev);
      expect(events[events.length - 1]).toEqual({ stream: 'exit', exit_code: 126 });
      expect(Buffer.concat(events.flatMap((e) => (e.stream === 'stderr' ? [Buffer.from(e.data)] : []))).toString()).toBe(
        'sbx: permission denied: bin/../plain.txt\n',
      );
    });

    it('argv mode: PATH is searched, and a non-executable match is 126', async () => {
      const env = { PATH: 'bin:.:/usr/bin:/bin' };
      expect(await run({ ...argv('tool'), env })).toMatchObject({ exitCode: 0, stdout: 'tool-ran\n', stderr: '' });
      expect(await run({ ...argv('plain.txt'), env })).toMatchObject({ exitCode: 126, stderr: 'sbx: permission denied: plain.txt\n' });
      // A shell builtin name still runs the program found on PATH, not the builtin.
      expect(await run(argv('echo', ['-n', 'x']))).toMatchObject({ exitCode: 0, stdout: 'x' });
    });

    it('shell mode: a missing command is 127 and names the command', async () => {
      const shell = (command: string, args: string[] = []): ExecSpec => ({ command, args, mode: 'shell', env: {}, workdir: '/workspace' });
      const res = await run(shell('sbx-no-such-command-xyz', ['x y']));
      expect(res.exitCode).toBe(127);
      expect(res.stdout).toBe('');
      if (options.exactShell) expect(res.stderr).toBe('sbx: command not found: sbx-no-such-command-xyz\n');
      else expect(res.stderr).toContain('sbx-no-such-command-xyz');
      // Scripts still run as the shell has them: builtins, keywords, operators.
      expect(await run(shell('echo', ['a b']))).toMatchObject({ exitCode: 0, stdout: 'a b\n', stderr: '' });
      expect(await run(shell('if true; then echo yes; fi'))).toMatchObject({ exitCode: 0, stdout: 'yes\n' });
      expect(await run(shell('true && sbx-no-such-command-xyz'))).toMatchObject({ exitCode: 127, stdout: '' });
    });
  });
}
