// `sbx` child processes for the benchmarks: each in a home of its own under `dir`, killed with the bench.
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'sbx.js');

/**
 * A process group rooted in `dir`: `start` runs `sbx args…` and waits for `ready` (30 s); it
 * resolves with the first capture group (or the match).
 */
export function processes(dir) {
  const procs = [];
  const cleanup = () => {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', cleanup);
  async function start(name, args, env, ready) {
    const home = join(dir, name);
    mkdirSync(home, { recursive: true });
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: home,
      env: { PATH: process.env.PATH ?? '', HOME: home, SVC_LOGGING_FORMAT: 'json', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    procs.push(child);
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const deadline = Date.now() + 30_000;
    for (;;) {
      const m = ready.exec(out);
      if (m) return m[1] ?? m[0];
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  /** Stops every process gracefully (SIGTERM, SIGKILL after 10 s), so they clean up what they made. */
  async function stop() {
    await Promise.all(
      procs.map(
        (p) =>
          new Promise((resolve) => {
            if (p.exitCode !== null) return resolve();
            p.once('exit', resolve);
            p.kill('SIGTERM');
            setTimeout(() => p.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
  }
  return { start, stop, cleanup };
}
