/**
 * Issue 31 item 2 (DESIGN.md §10): what an exec leaves running (`setsid … &`, a plain `… &`, a
 * server) lives on after it, as in a container — on mock and proot through one PID namespace per
 * sandbox that every exec enters. The exec returns when its own command ends; the next exec sees
 * what was left; a preview of a server started in the background answers; destroy ends it all; the
 * server's environment and pid stay invisible. Mock always; proot and docker behind their flags.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/index.js';
import { freePort, hostRequest } from '../helpers/preview.js';
import { PROVIDER_SKIP, providerTitle, startProviderServer } from '../helpers/provider-server.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const DOMAIN = 'left.test';

/** Host pids whose command line is exactly `argv` (zombies excluded). */
function hostPids(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  const out: number[] = [];
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
      if (readFileSync(`/proc/${n}/cmdline`, 'utf8') === want && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') out.push(Number(n));
    } catch {
      // gone
    }
  }
  return out;
}

interface SuiteOptions {
  /** The sandbox's processes are host processes this test can see. */
  hostPids: boolean;
  /** Previews reach the sandbox's own address (a container): any address works; else 127.0.0.1. */
  bindAll: boolean;
  /** Guest paths are translated (proot, docker): what is left running keeps writing into the sandbox. */
  translated: boolean;
}

function suite(name: string, start: () => Promise<TestServer>, opts: SuiteOptions): void {
  describe(`left running: ${name}`, () => {
    let srv: TestServer;
    let client: Client;
    beforeAll(async () => {
      srv = await start();
      client = new Client({ url: srv.url });
    }, 120_000);
    afterAll(async () => {
      await client?.close();
      await srv?.close();
    });

    it('an exec that leaves `setsid … &` and `… &` running returns at once; they live for the next exec; destroy ends them', async () => {
      const box = await client.spawn({});
      const n = 300 + Math.floor(Math.random() * 600);
      const detached = ['sleep', String(n)];
      const plain = ['sleep', String(n + 1000)];
      try {
        const started = Date.now();
        const res = await client.exec(box.id, {
          command:
            `setsid ${detached.join(' ')} >/dev/null 2>&1 & echo $! > /tmp/detached.pid; ` +
            `${plain.join(' ')} & echo $! > /tmp/plain.pid; echo started`,
          timeout: '60s',
        });
        // Generous bound: the point is that it does not wait for the sleeps (or a timeout).
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(res).toMatchObject({ exit_code: 0, stdout: 'started\n' });

        const next = await client.exec(box.id, {
          command: 'kill -0 "$(cat /tmp/detached.pid)" && kill -0 "$(cat /tmp/plain.pid)" && echo alive',
        });
        expect(next).toMatchObject({ exit_code: 0, stdout: 'alive\n' });
        if (opts.hostPids) {
          expect(hostPids(detached)).toHaveLength(1);
          expect(hostPids(plain)).toHaveLength(1);
        }
        if (opts.translated) {
          // Still under the sandbox's path translation after its exec ended (never detached onto host
          // paths), even after the sandbox tried to kill its namespace's init (the tracer on proot).
          expect((await client.exec(box.id, { command: 'kill -9 1 2>/dev/null; echo tried' })).stdout).toBe('tried\n');
          const late = await client.exec(box.id, {
            command: 'setsid sh -c "sleep 1; echo inside > /workspace/late.txt" >/dev/null 2>&1 & echo ok',
          });
          expect(late).toMatchObject({ exit_code: 0, stdout: 'ok\n' });
          let text = '';
          await waitFor(
            'the late write lands in the sandbox',
            async () => {
              text = await client.files.read(box.id, '/workspace/late.txt').then(
                (b) => Buffer.from(b).toString(),
                () => '',
              );
              return text !== '';
            },
            10_000,
          );
          expect(text).toBe('inside\n');
        }
      } finally {
        await client.destroy(box.id);
      }
      if (opts.hostPids)
        await waitFor('the sandbox processes gone after destroy', () => [...hostPids(detached), ...hostPids(plain)].length === 0, 5_000);
    });

    it.skipIf(name !== 'proot')('a sandbox that kills its own keeper gets one error, then a new keeper', async () => {
      const box = await client.spawn({});
      try {
        // Something left running keeps the tracer up; then the keeper alone is killed.
        expect((await client.exec(box.id, { command: 'sleep 600 >/dev/null 2>&1 & echo ok' })).stdout).toBe('ok\n');
        const kill = 'for p in /proc/[0-9]*; do grep -q "exec 9<&""0" $p/cmdline 2>/dev/null && kill -9 ${p#/proc/}; done; echo done';
        expect((await client.exec(box.id, { command: kill, timeout: '30s' })).stdout).toBe('done\n');
        const started = Date.now();
        const err = await client.exec(box.id, { command: 'echo hi', timeout: '60s' }).then(
          () => null,
          (e: { code?: string }) => e.code,
        );
        expect(err).toBe('provider_error');
        expect(Date.now() - started).toBeLessThan(10_000);
        expect(await client.exec(box.id, { command: 'echo again' })).toMatchObject({ exit_code: 0, stdout: 'again\n' });
      } finally {
        await client.destroy(box.id);
      }
    });

    it("a server started in the background answers its preview; the server's environment and pid stay invisible", async () => {
      const box = await client.spawn({});
      try {
        await client.files.write(box.id, '/workspace/www/index.html', `<p>left running on ${name}</p>\n`);
        const port = opts.bindAll ? 8080 : await freePort();
        const addr = opts.bindAll ? String(port) : `127.0.0.1:${port}`;
        const started = Date.now();
        const res = await client.exec(box.id, {
          command: `busybox httpd -f -p ${addr} -h www & echo up`,
          workdir: '/workspace',
          timeout: '60s',
        });
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(res).toMatchObject({ exit_code: 0, stdout: 'up\n' });
        const host = `${port}-${box.id}.${DOMAIN}`;
        let last: { status: number; body: Buffer } | null = null;
        await waitFor(
          'the background server answers through the preview',
          async () => {
            last = await hostRequest(srv.url, host, '/index.html').catch(() => null);
            return last?.status === 200;
          },
          15_000,
        );
        expect(last!.body.toString()).toBe(`<p>left running on ${name}</p>\n`);

        // The server (this test process runs it) is neither listed nor readable from inside.
        const canary = `keepercanary${randomBytes(6).toString('hex')}`;
        process.env.SBX_KEEPER_TEST_CANARY = canary;
        try {
          const scan = await client.exec(box.id, {
            command:
              'for f in /proc/[0-9]*/environ; do cat "$f"; echo; done 2>/dev/null | grep -c "$A$B"; test -e ' +
              '/proc/$SERVER && echo visible || echo hidden',
            env: { A: canary.slice(0, 8), B: canary.slice(8), SERVER: String(process.pid) },
          });
          expect(scan.stdout).toBe('0\nhidden\n');
        } finally {
          delete process.env.SBX_KEEPER_TEST_CANARY;
        }
      } finally {
        await client.destroy(box.id);
      }
    });
  });
}

const preview = { server: { preview_domain: DOMAIN } };
suite('mock', () => startProviderServer('mock', preview), { hostPids: true, bindAll: false, translated: false });

describe.skipIf(PROVIDER_SKIP.proot !== undefined)(providerTitle('proot', 'proot'), () => {
  suite('proot', () => startProviderServer('proot', preview), { hostPids: true, bindAll: false, translated: true });
});

describe.skipIf(PROVIDER_SKIP.docker !== undefined)(providerTitle('docker', 'docker'), () => {
  // Both exec paths: sbx-agent (the default) answers once the command exited and its output went
  // quiet, whatever it left holding the pipes; the engine's exec path without it.
  for (const agent of ['auto', 'off'] as const) {
    suite(`docker (agent ${agent})`, () => startProviderServer('docker', { ...preview, providers: { docker: { agent } } }), {
      hostPids: false,
      bindAll: true,
      translated: true,
    });
  }
});
