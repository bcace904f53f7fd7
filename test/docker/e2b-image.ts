import type Docker from 'dockerode';
import { readFileSync } from 'node:fs';
import { pack } from 'tar-stream';
import { TEST_IMAGE } from './engine.js';

/** The image E2B's SDK needs (DESIGN.md §14): the busybox test image plus Debian's static bash and a `user` account. */
export const E2B_TEST_IMAGE = 'sbx-test/e2b:latest';
const BASH = process.env.SBX_TEST_BASH_STATIC ?? '/bin/bash-static';

const PASSWD = `root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
`;
const GROUP = `root:x:0:
user:x:1000:
nogroup:x:65534:
`;

/**
 * Builds `sbx-test/e2b:latest` offline from the busybox test image (no registry): `/bin/bash`
 * from the host's `bash-static` (Debian `bash-static`, installed by .ci/run), `/etc/passwd` with
 * `user` (uid 1000) and its home `/home/user` (mode 1777:
 * sbx's file API writes as the container's root, which holds no CAP_DAC_OVERRIDE). Built once; reused while it exists.
 */
export async function ensureE2bImage(docker: Docker): Promise<string> {
  try {
    await docker.getImage(E2B_TEST_IMAGE).inspect();
    return E2B_TEST_IMAGE;
  } catch {
    // Not built yet.
  }
  const tar = pack();
  tar.entry(
    { name: 'Dockerfile' },
    [
      `FROM ${TEST_IMAGE}`,
      'COPY bash /bin/bash',
      'COPY passwd /etc/passwd',
      'COPY group /etc/group',
      // sbx's file API writes as the container's root without CAP_DAC_OVERRIDE: the home is shared like /tmp.
      'RUN mkdir -p /home/user && chown 1000:1000 /home/user && chmod 1777 /home/user',
      '',
    ].join('\n'),
  );
  tar.entry({ name: 'bash', mode: 0o755 }, readFileSync(BASH));
  tar.entry({ name: 'passwd' }, PASSWD);
  tar.entry({ name: 'group' }, GROUP);
  tar.finalize();
  const stream = await docker.buildImage(tar as never, { t: E2B_TEST_IMAGE, rm: true, forcerm: true });
  await new Promise<void>((resolve, reject) =>
    docker.modem.followProgress(stream, (err: Error | null, out: Array<{ error?: string }>) => {
      const failed = err ?? out.find((o) => o.error);
      if (failed) reject(new Error(`building ${E2B_TEST_IMAGE}: ${String((failed as { error?: string }).error ?? failed)}`));
      else resolve();
    }),
  );
  return E2B_TEST_IMAGE;
}
