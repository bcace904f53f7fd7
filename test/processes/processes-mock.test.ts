/** Background processes on the mock provider (attached: they end with the control plane). */
import { describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { useProviderServer } from '../helpers/provider-server.js';
import { readOutput } from './helpers.js';
import { processContract } from './processes.contract.js';

describe('background processes on mock', () => {
  const server = useProviderServer('mock');
  processContract(() => ({ ...server(), runner: 'attached' }));

  it('an attached process is recorded as killed when the control plane stops; its output stays readable', async () => {
    const plane = server().restartable();
    try {
      const url = await plane.start();
      const sb = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
      const p = (await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, { command: 'echo hello; sleep 100' })).body.id as string;
      // Stopped once it runs: its first line is out.
      expect((await readOutput(url, sb, p, { follow: true, stopAfter: 6 })).bytes.toString()).toBe('hello\n');
      await plane.stop();
      const again = await plane.start();
      const rec = (await call(again, 'GET', `/api/v1/sandboxes/${sb}/processes/${p}`)).body;
      // Killed with the exec that held it (the status the provider saw, 137 for SIGKILL).
      expect(rec).toMatchObject({ id: p, state: 'killed' });
      const out = await fetch(`${again}/api/v1/sandboxes/${sb}/processes/${p}/output`);
      expect(
        (await out.text())
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l)),
      ).toEqual([
        { stream: 'stdout', offset: 0, data: 'hello\n' },
        { stream: 'exit', offset: 6, exit_code: rec.exit_code, state: 'killed' },
      ]);
    } finally {
      await plane.remove();
    }
  }, 60_000);
});
