/**
 * `sbx exec` reads like `docker exec` (DESIGN.md §5): options before the id, the command after it
 * verbatim, stdin only with -i, -t for a terminal, 125 for every failure of sbx itself.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'sbx.js');

/** Runs a bash script (async: the test server answers from this process). */
function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], { env, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

/** A pretend terminal on stdin: records raw-mode switches. */
function ttyStdin() {
  const stream = new PassThrough() as PassThrough & {
    isTTY: boolean;
    isRaw: boolean;
    setRawMode: (on: boolean) => unknown;
    modes: boolean[];
  };
  stream.isTTY = true;
  stream.isRaw = false;
  stream.modes = [];
  stream.setRawMode = (on: boolean) => {
    stream.isRaw = on;
    stream.modes.push(on);
    return stream;
  };
  return stream;
}

describe('sbx exec ID CMD ARG… (mock provider)', () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  let id: string;
  const dir = mkdtempSync(join(tmpdir(), 'sbx-exec-loop-'));
  beforeAll(async () => {
    server = await startTestServer();
    sbx = sbxAt(server.url);
    id = (await sbx(['spawn'])).stdout.trim();
  });
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('everything after the id is the command, verbatim: its flags are not sbx options', async () => {
    const ls = await sbx(['exec', id, 'ls', '-la', '/']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^total \d+\n/);
    expect(ls.stderr).toBe('');
    // sbx's own option names after the id belong to the command too, as does a later --.
    const r = await sbx([
      'exec',
      id,
      'printf',
      '%s|',
      '-la',
      '--json',
      '-i',
      '-t',
      '--timeout',
      '1s',
      '--sh',
      '--',
      '-h',
      '--help',
      '--url',
      'x',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('-la|--json|-i|-t|--timeout|1s|--sh|--|-h|--help|--url|x|');
    // A leading -- is still accepted (and not passed on).
    const dashed = await sbx(['exec', id, '--', 'printf', '%s|', '-n', 'a b']);
    expect(dashed).toMatchObject({ code: 0, stdout: '-n|a b|' });
  });

  it('options go before the id: --sh, -e, -w, --timeout; global options there too', async () => {
    const sh = await sbx(['exec', '--sh', '-e', 'N=3', '-w', '/tmp', id, 'echo "$N" | tr 3 4; pwd']);
    expect(sh.code).toBe(0);
    // The mock provider roots sandbox paths in a host directory; the workdir is its /tmp.
    expect(sh.stdout).toMatch(/^4\n(.*\/)?tmp\n$/);
    const timeout = await sbx(['exec', '--timeout', '500ms', id, 'sleep', '5']);
    expect(timeout.code).toBe(124);
    const json = await sbx(['exec', '--json', id, 'sh', '-c', 'echo out; exit 3']);
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({ exit_code: 3, stdout: 'out\n' });
    // --url after `exec` wins over SBX_URL, which points nowhere.
    const viaFlag = await sbxAt('http://127.0.0.1:9')(['exec', '--url', server.url, id, 'echo', 'flag url']);
    expect(viaFlag).toMatchObject({ code: 0, stdout: 'flag url\n' });
    // Global options before `exec` keep working.
    const before = await sbxAt('http://127.0.0.1:9')(['--url', server.url, '--json', 'exec', id, 'true']);
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ exit_code: 0 });
  });

  it('a `while read` loop over 3 ids runs 3 times: exec reads no stdin without -i (real bin)', async () => {
    const ids = [id, (await sbx(['spawn'])).stdout.trim(), (await sbx(['spawn'])).stdout.trim()];
    const list = join(dir, 'ids');
    writeFileSync(list, `${ids.join('\n')}\n`);
    const env = { ...process.env, SBX_URL: server.url, HOME: dir };
    for (const script of [
      `while read id; do node "$BIN" exec "$id" echo "ran $id"; done < "$LIST"`,
      `cat "$LIST" | while read id; do node "$BIN" exec "$id" -- sh -c 'echo "ran $0"' "$id"; done`,
    ]) {
      const r = await bash(script, { ...env, BIN, LIST: list });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toBe(ids.map((x) => `ran ${x}\n`).join(''));
    }
    // With -i the first exec takes the rest of the list, as docker exec -i would.
    const greedy = await bash(`while read id; do node "$BIN" exec -i "$id" sh -c 'echo "ran"; cat'; done < "$LIST"`, {
      ...env,
      BIN,
      LIST: list,
    });
    expect(greedy.stdout).toBe(`ran\n${ids.slice(1).join('\n')}\n`);
  });

  it('-i forwards stdin; -t without a local terminal runs without one, silently', async () => {
    const piped = await sbx(['exec', '-i', id, 'sh', '-c', 'tr a-z A-Z'], { stdin: 'hello\n' });
    expect(piped).toMatchObject({ code: 0, stdout: 'HELLO\n', stderr: '' });
    const t = await sbx(['exec', '-t', id, 'sh', '-c', 'cat; echo done'], { stdin: 'not read' });
    expect(t).toMatchObject({ code: 0, stdout: 'done\n', stderr: '' });
    const it2 = await sbx(['exec', '-it', id, 'cat'], { stdin: 'piped\n' });
    expect(it2).toMatchObject({ code: 0, stdout: 'piped\n', stderr: '' });
  });

  it('-it on a provider without terminals forwards the local terminal in line mode (no raw mode)', async () => {
    const stdin = ttyStdin();
    const run = sbx(['exec', '-it', id, 'sh', '-c', 'read l; echo "got $l"; exit 6'], { stdinStream: stdin });
    stdin.write('line\n');
    const r = await run;
    expect(r).toMatchObject({ code: 6, stdout: 'got line\n' });
    expect(stdin.modes).toEqual([]);
    stdin.end();
  });

  it('exit 125 for every failure of sbx itself; the command own codes pass through', async () => {
    const own = await sbx(['exec', id, 'sh', '-c', 'exit 125']);
    expect(own.code).toBe(125);
    expect(own.stderr).toBe('');
    expect((await sbx(['exec', id, 'sh', '-c', 'exit 2'])).code).toBe(2);
    const unknown = await sbx(['exec', 'sb-unknown0000', 'true']);
    expect(unknown).toMatchObject({ code: 125, stderr: 'sbx: sandbox sb-unknown0000 not found\n' });
    const unreachable = await sbxAt('http://127.0.0.1:9')(['exec', id, 'true']);
    expect(unreachable.code).toBe(125);
    expect(unreachable.stderr).toMatch(/^sbx: cannot reach sbx server at http:\/\/127\.0\.0\.1:9/);
    const remotePath = await sbx(['exec', `${id}:/tmp`, 'ls']);
    expect(remotePath.code).toBe(125);
    expect(remotePath.stderr).toMatch(/is not a sandbox id/);
    const noScript = await sbx(['exec', '--sh', id]);
    expect(noScript).toMatchObject({ code: 125, stderr: "sbx: exec --sh needs a script after the id: sbx exec --sh ID 'a | b'\n" });
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx exec -it (docker provider: a terminal)'), () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  let id: string;
  beforeAll(async () => {
    await requireEngine();
    server = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    sbx = sbxAt(server.url);
    id = (await sbx(['spawn'])).stdout.trim();
  });
  afterAll(async () => {
    if (id) await sbx(['rm', id]).catch(() => undefined);
    await server?.close();
  });

  it('-it gives the command a terminal of the local size, in raw mode, restored at the end', async () => {
    const stdin = ttyStdin();
    const run = sbx(['exec', '-it', id, 'sh'], {
      tty: true,
      stdinStream: stdin,
      onStdoutSink: (s) => {
        s.columns = 91;
        s.rows = 27;
      },
      onStdout: (_c, all) => {
        if (all().includes('27 91') && !stdin.writableEnded) stdin.write('exit 5\r');
      },
    });
    setTimeout(() => stdin.write('stty size\r'), 300);
    const guard = setTimeout(() => stdin.write('exit 99\r'), 15_000);
    const r = await run;
    clearTimeout(guard);
    expect(r.stdout).toContain('27 91');
    expect(r.code).toBe(5);
    expect(stdin.modes).toEqual([true, false]);
  });

  it('-t without a local terminal runs the command without one', async () => {
    const r = await sbx(['exec', '-t', id, 'sh', '-c', '[ -t 0 ] && echo tty || echo no-tty']);
    expect(r).toMatchObject({ code: 0, stdout: 'no-tty\n', stderr: '' });
  });
});
