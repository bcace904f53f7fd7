/**
 * `sbx doctor` against a server reports the server's default image, not the local config's
 * (issue 31 item 6): `GET /api/v1/providers/docker` carries `config.default_image` (the server's
 * `defaults.image`) and `config.image_present` (its engine has it), and doctor reads them. Real
 * servers on the real engine (SBX_TEST_DOCKER=1); the local config here is the defaults
 * (debian:bookworm-slim), which must not appear.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doctorCommand } from '../../src/transports/cli/commands/doctor.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

const ABSENT = 'sbx-test/not-on-this-engine:latest';
const dockerServer = (image: string) =>
  startTestServer({ providers: { default: 'docker', docker: { socket_path: SOCKET }, mock: { enabled: false } }, defaults: { image } });

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle("sbx doctor reads the server's default image"), () => {
  let present: TestServer;
  let absent: TestServer;
  let home: string;
  beforeAll(async () => {
    await requireEngine();
    home = mkdtempSync(join(tmpdir(), 'sbx-doctor-image-'));
    present = await dockerServer(TEST_IMAGE);
    absent = await dockerServer(ABSENT);
  }, 60_000);
  afterAll(async () => {
    await present?.close();
    await absent?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('GET /providers/docker names the default image and whether the engine has it', async () => {
    const yes = await call(present.url, 'GET', '/api/v1/providers/docker');
    expect(yes.status).toBe(200);
    expect(yes.body.config).toMatchObject({ default_image: TEST_IMAGE, image_present: true, runtime: expect.any(String) });
    const no = await call(absent.url, 'GET', '/api/v1/providers/docker');
    expect(no.body.config).toMatchObject({ default_image: ABSENT, image_present: false });
  });

  const doctor = async (url: string) => {
    const cli = fakeCli({ url, json: true, home });
    await runCommand(doctorCommand, cli.ctx, {});
    const out = JSON.parse(cli.stdout()) as { checks: Array<{ title: string; status: string; detail: string }> };
    await cli.close();
    return out.checks;
  };

  it("doctor shows the server's image and leaves the local config's out", async () => {
    const checks = await doctor(present.url);
    expect(checks.find((c) => c.title === 'server default image')).toMatchObject({
      status: 'ok',
      detail: `${TEST_IMAGE} is present on the server's engine`,
    });
    expect(checks.find((c) => c.title === 'default image')).toBeUndefined();
    expect(JSON.stringify(checks)).not.toContain('debian:bookworm-slim');

    const missing = (await doctor(absent.url)).find((c) => c.title === 'server default image');
    expect(missing).toMatchObject({ status: 'warn', detail: expect.stringContaining(`${ABSENT} is not present on the server's engine`) });
  }, 60_000);
});
