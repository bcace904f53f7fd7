import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import type { ExecSpec, Provider } from '../../src/core/ports/index.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE, testInstallationId, testProvider } from './engine.js';

const never = new AbortController().signal;
const sh = (command: string, extra: Partial<ExecSpec> = {}): ExecSpec => ({ command, args: [], mode: 'shell', env: {}, ...extra });

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => new Error('expected an SbxError, but it succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return (err as SbxError).code;
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider: edge cases of exec and files'), () => {
  let docker: Docker;
  const installationId = testInstallationId();
  let p: Provider;
  let rid: string;
  const run = async (spec: ExecSpec) => {
    let stdout = '';
    let exit: number | null = null;
    for await (const ev of p.exec(rid, spec, never)) {
      if (ev.stream === 'exit') exit = ev.exit_code;
      else if (ev.stream === 'stdout') stdout += Buffer.from(ev.data).toString();
    }
    return { stdout, exit };
  };

  beforeAll(async () => {
    docker = await requireEngine();
    p = testProvider(installationId);
    ({ runtime_id: rid } = await p.spawn({
      sandbox_id: `sb-edge${randomBytes(4).toString('hex')}`,
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    }));
  });
  afterAll(async () => {
    await removeInstallation(docker, installationId);
  });

  it('a workdir that is not a directory is a bad_request, not engine text', async () => {
    await p.writeFile(rid, '/workspace/plain', Buffer.from('x'), undefined);
    expect(await code(run(sh('pwd', { workdir: '/nope' })))).toBe('bad_request');
    expect(await code(run(sh('pwd', { workdir: '/workspace/plain' })))).toBe('bad_request');
    // A command that merely prints the same words is left alone.
    const fake = await run(sh('echo "OCI runtime exec failed: cannot chdir to cwd"; exit 126'));
    expect(fake).toEqual({ stdout: 'OCI runtime exec failed: cannot chdir to cwd\n', exit: 126 });
  });

  it('runs concurrent execs independently', async () => {
    const outs = await Promise.all([1, 2, 3, 4, 5].map((i) => run(sh(`sleep 0.$i; echo ${i}`))));
    expect(outs).toEqual([1, 2, 3, 4, 5].map((i) => ({ stdout: `${i}\n`, exit: 0 })));
  });

  it('writes: things in the way are bad_request; an overwrite without mode keeps the mode', async () => {
    await p.writeFile(rid, '/workspace/w/d/f', Buffer.from('x'), 0o700);
    expect(await code(p.writeFile(rid, '/workspace/w/d', Buffer.from('x'), undefined)), 'write onto a dir').toBe('bad_request');
    expect(await code(p.writeFile(rid, '/workspace/w/d/f/sub', Buffer.from('x'), undefined)), 'write under a file').toBe('bad_request');
    expect(await code(p.listFiles(rid, '/workspace/w/d/f')), 'list a file').toBe('bad_request');
    expect(await code(p.readFile(rid, '/workspace/w/d')), 'read a dir').toBe('bad_request');
    await p.writeFile(rid, '/workspace/w/d/f', Buffer.from('again'), undefined);
    expect(await p.stat(rid, '/workspace/w/d/f')).toMatchObject({ size: 5, mode: '0700' });
    await p.chmod(rid, '/workspace/w/d/f', 0o4755);
    await p.writeFile(rid, '/workspace/w/d/f', Buffer.from('third'), undefined);
    expect((await p.stat(rid, '/workspace/w/d/f')).mode).toBe('04755');
  });

  it('names with spaces, newlines and leading dashes survive list, glob, stat, move and delete', async () => {
    const names = ['a b', 'new\nline', '-dash', "q'uote", '$(id)'];
    for (const n of names) await p.writeFile(rid, `/workspace/n/${n}`, Buffer.from(n), undefined);
    expect((await p.listFiles(rid, '/workspace/n')).map((f) => f.name)).toEqual([...names].sort());
    expect(await p.glob(rid, '/workspace/n/*')).toEqual(names.map((n) => `/workspace/n/${n}`).sort());
    expect((await p.stat(rid, '/workspace/n/new\nline')).size).toBe(8);
    await p.moveFile(rid, '/workspace/n/-dash', '/workspace/n/moved dir/-dash');
    expect(Buffer.from(await p.readFile(rid, '/workspace/n/moved dir/-dash')).toString()).toBe('-dash');
    await p.deleteFile(rid, '/workspace/n/$(id)', false);
    expect(await code(p.stat(rid, '/workspace/n/$(id)'))).toBe('not_found');
    expect((await p.listFiles(rid, '/workspace/n')).map((f) => f.name)).toEqual(['a b', 'moved dir', 'new\nline', "q'uote"]);
  });

  it('reads follow symlinks inside the container', async () => {
    await p.writeFile(rid, '/workspace/s/target.txt', Buffer.from('T'), undefined);
    await run(sh('ln -s target.txt /workspace/s/rel && ln -s /workspace/s /workspace/sdir && ln -s /nowhere /workspace/s/dangling'));
    expect(Buffer.from(await p.readFile(rid, '/workspace/s/rel')).toString()).toBe('T');
    expect(Buffer.from(await p.readFile(rid, '/workspace/sdir/target.txt')).toString()).toBe('T');
    expect((await p.stat(rid, '/workspace/s/rel')).size).toBe(1);
    expect(await code(p.readFile(rid, '/workspace/s/dangling'))).toBe('not_found');
    expect((await p.listFiles(rid, '/workspace/sdir')).map((f) => f.name)).toEqual(['rel', 'target.txt']);
  });
});
