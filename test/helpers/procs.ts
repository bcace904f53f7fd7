/** `sbx` as real child processes (serve, worker) for the suites that run several of them. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '..', '..', 'bin', 'sbx.js');

export interface Proc {
  child: ChildProcess;
  /** The first capture group of the ready pattern (e.g. the URL serve listens on). */
  ready: string;
  log(): string;
  alive(): boolean;
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after 20 s. */
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

/** Starts `sbx args…` with HOME=home and waits for `ready` on its output (30 s). */
export async function startSbx(home: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<Proc> {
  mkdirSync(home, { recursive: true });
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: home,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, SVC_LOGGING_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = ready.exec(out);
    if (m) {
      return {
        child,
        ready: m[1] ?? m[0],
        log: () => out,
        alive,
        exited,
        async stop() {
          if (!alive()) return;
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
          await exited;
          clearTimeout(t);
        },
        async kill9() {
          if (!alive()) return;
          child.kill('SIGKILL');
          await exited;
        },
      };
    }
    if (!alive() || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx ${args[0]} did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
