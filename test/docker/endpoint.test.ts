import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Server as TlsServer } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDockerProvider, LABEL_INSTALLATION } from '../../src/adapters/providers/docker/index.js';
import { runServe } from '../../src/transports/cli/commands/serve.js';
import { DockerEndpointError, resolveDockerEndpoint, type DockerEndpoint } from '../../src/config/docker-endpoint.js';
import type { Provider } from '../../src/core/ports/index.js';
import { collect, never } from '../contract/provider-contract-helpers.js';
import { call } from '../helpers/http.js';
import { startTestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE, testInstallationId } from './engine.js';

const dirs: string[] = [];
function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Writes a docker CLI context as `docker context create` does: meta under the sha256 of its name. */
function writeContext(
  configDir: string,
  name: string,
  host: string,
  tls?: Record<string, string>,
  extra: Record<string, unknown> = {},
): void {
  const sha = createHash('sha256').update(name).digest('hex');
  mkdirSync(join(configDir, 'contexts', 'meta', sha), { recursive: true });
  writeFileSync(
    join(configDir, 'contexts', 'meta', sha, 'meta.json'),
    JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: host, SkipTLSVerify: false, ...extra } } }),
  );
  if (tls) {
    const tdir = join(configDir, 'contexts', 'tls', sha, 'docker');
    mkdirSync(tdir, { recursive: true });
    for (const [file, pem] of Object.entries(tls)) writeFileSync(join(tdir, file), pem);
  }
}

describe('resolveDockerEndpoint: the docker CLI order, first present source wins', () => {
  const home = tempDir('sbx-ep-home-');
  const resolve = (o: Parameters<typeof resolveDockerEndpoint>[0]) => resolveDockerEndpoint({ home, env: {}, ...o });

  it('defaults to /var/run/docker.sock', () => {
    expect(resolve({})).toEqual({
      kind: 'unix',
      socketPath: '/var/run/docker.sock',
      source: 'default',
      description: 'unix:///var/run/docker.sock (default)',
    });
  });

  it('explicit socket_path, then explicit host, then DOCKER_HOST, then the context', () => {
    const cfg = tempDir('sbx-ep-cfg-');
    writeFileSync(join(cfg, 'config.json'), JSON.stringify({ currentContext: 'ctx' }));
    writeContext(cfg, 'ctx', 'unix:///ctx.sock');
    const env = { DOCKER_HOST: 'unix:///env.sock', DOCKER_CONFIG: cfg };
    expect(resolve({ socketPath: '/cfg.sock', host: 'unix:///host.sock', env }).description).toBe(
      'unix:///cfg.sock (providers.docker.socket_path)',
    );
    expect(resolve({ host: 'unix:///host.sock', env }).description).toBe('unix:///host.sock (providers.docker.host)');
    expect(resolve({ env }).description).toBe('unix:///env.sock (DOCKER_HOST)');
    expect(resolve({ env: { DOCKER_CONFIG: cfg } })).toMatchObject({
      kind: 'unix',
      socketPath: '/ctx.sock',
      source: 'docker context "ctx"',
      description: 'unix:///ctx.sock (docker context "ctx")',
    });
    // DOCKER_CONTEXT wins over currentContext; "default" is the default socket.
    writeContext(cfg, 'other', 'tcp://10.1.2.3:2375');
    expect(resolve({ env: { DOCKER_CONFIG: cfg, DOCKER_CONTEXT: 'other' } })).toMatchObject({
      kind: 'tcp',
      host: '10.1.2.3',
      port: 2375,
      tls: null,
      source: 'docker context "other"',
    });
    expect(resolve({ env: { DOCKER_CONFIG: cfg, DOCKER_CONTEXT: 'default' } }).source).toBe('default');
  });

  it('reads the context from ~/.docker when DOCKER_CONFIG is unset', () => {
    const h = tempDir('sbx-ep-home2-');
    mkdirSync(join(h, '.docker'));
    writeFileSync(join(h, '.docker', 'config.json'), JSON.stringify({ auths: {}, currentContext: 'colima' }));
    writeContext(join(h, '.docker'), 'colima', `unix://${h}/.colima/default/docker.sock`);
    expect(resolveDockerEndpoint({ home: h, env: {} }).description).toBe(
      `unix://${h}/.colima/default/docker.sock (docker context "colima")`,
    );
  });

  it('tcp: default ports, TLS from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH (PEM contents)', () => {
    const certs = tempDir('sbx-ep-certs-');
    writeFileSync(join(certs, 'ca.pem'), 'CA');
    writeFileSync(join(certs, 'cert.pem'), 'CERT');
    writeFileSync(join(certs, 'key.pem'), 'KEY');
    expect(resolve({ env: { DOCKER_HOST: 'tcp://engine.example' } })).toMatchObject({
      kind: 'tcp',
      host: 'engine.example',
      port: 2375,
      tls: null,
      description: 'tcp://engine.example:2375 (DOCKER_HOST)',
    });
    expect(resolve({ env: { DOCKER_HOST: 'tcp://10.0.0.5', DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs } })).toEqual({
      kind: 'tcp',
      host: '10.0.0.5',
      port: 2376,
      tls: { ca: 'CA', cert: 'CERT', key: 'KEY', verify: true },
      source: 'DOCKER_HOST',
      description: 'tcp://10.0.0.5:2376 over TLS (DOCKER_HOST)',
    });
    expect(resolve({ env: { DOCKER_HOST: '[::1]:2400', DOCKER_TLS: '1', DOCKER_CERT_PATH: certs } })).toMatchObject({
      host: '::1',
      port: 2400,
      tls: { verify: false },
      description: 'tcp://[::1]:2400 over TLS, server not verified (DOCKER_HOST)',
    });
    // TLS settings do not matter for a unix socket.
    expect(resolve({ env: { DOCKER_HOST: 'unix:///x.sock', DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: '/nonexistent' } }).kind).toBe('unix');
  });

  it('refuses what it cannot use, with a clear message (never a silent fallback)', () => {
    const err = (o: Parameters<typeof resolveDockerEndpoint>[0]) => {
      try {
        resolve(o);
      } catch (e) {
        expect(e).toBeInstanceOf(DockerEndpointError);
        return (e as Error).message;
      }
      throw new Error('expected a DockerEndpointError');
    };
    expect(err({ env: { DOCKER_HOST: 'ssh://me@box' } })).toMatch(
      /^DOCKER_HOST: unsupported docker host scheme "ssh:\/\/" in "ssh:\/\/me@box"/,
    );
    expect(err({ host: 'npipe:////./pipe/docker_engine' })).toMatch(
      /^providers\.docker\.host: unsupported docker host scheme "npipe:\/\/"/,
    );
    expect(err({ env: { DOCKER_HOST: 'unix://relative.sock' } })).toMatch(
      /^DOCKER_HOST: unix socket address must be unix:\/\/\/absolute\/path/,
    );
    expect(err({ socketPath: 'relative.sock' })).toMatch(/^providers\.docker\.socket_path must be an absolute path/);
    const cfg = tempDir('sbx-ep-bad-');
    expect(err({ env: { DOCKER_CONFIG: cfg, DOCKER_CONTEXT: 'gone' } })).toMatch(
      /^docker context "gone": cannot read .*meta\.json: the context does not exist$/,
    );
    writeFileSync(join(cfg, 'config.json'), '{not json');
    expect(err({ env: { DOCKER_CONFIG: cfg } })).toMatch(/^cannot read the docker CLI config .*config\.json: not valid JSON$/);
    writeContext(cfg, 'half', 'tcp://127.0.0.1:1', { 'cert.pem': 'CERT' });
    expect(err({ env: { DOCKER_CONFIG: cfg, DOCKER_CONTEXT: 'half' } })).toMatch(
      /^docker context "half": .* has cert\.pem without key\.pem$/,
    );
  });
});

/** CA, a server certificate for 127.0.0.1/localhost and a client certificate, made with openssl. */
function makeCerts(dir: string): void {
  const ossl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const key = (name: string) => ossl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', name);
  key('ca-key.pem');
  ossl('req', '-x509', '-new', '-key', 'ca-key.pem', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=sbx-test-ca');
  key('server-key.pem');
  ossl('req', '-new', '-key', 'server-key.pem', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  ossl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-out',
    'server-cert.pem',
    '-days',
    '2',
    '-extfile',
    'server.ext',
  );
  key('key.pem');
  ossl('req', '-new', '-key', 'key.pem', '-out', 'client.csr', '-subj', '/CN=sbx-client');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  ossl(
    'x509',
    '-req',
    '-in',
    'client.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca-key.pem',
    '-CAcreateserial',
    '-out',
    'cert.pem',
    '-days',
    '2',
    '-extfile',
    'client.ext',
  );
}

interface Relay {
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

/**
 * Pipes every accepted connection to the engine socket, half-close included (a command's stdin
 * ends while its output still flows), as a real engine connection behaves.
 */
function relayTo(server: NetServer | TlsServer): Relay {
  const sockets = new Set<Socket>();
  let accepted = 0;
  // Raw connections too (TLS handshakes that never completed), so close() never waits on them.
  server.on('connection', (raw: Socket) => {
    sockets.add(raw);
    raw.on('close', () => sockets.delete(raw));
  });
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (client: Socket) => {
    accepted++;
    const engine = createConnection({ path: SOCKET, allowHalfOpen: true });
    for (const s of [client, engine]) {
      sockets.add(s);
      s.on('error', () => {
        client.destroy();
        engine.destroy();
      });
      s.on('close', () => {
        sockets.delete(s);
        (s === client ? engine : client).destroy();
      });
    }
    client.pipe(engine);
    engine.pipe(client);
  });
  return {
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A unix socket in front of the engine. */
async function unixRelay(path: string): Promise<Relay & { path: string }> {
  const server = createNetServer({ allowHalfOpen: true });
  const relay = relayTo(server);
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { ...relay, path };
}

/** A TLS server that requires a client certificate from the CA, in front of the engine. */
async function tlsRelay(certs: string): Promise<Relay & { port: number }> {
  const server = new TlsServer({
    key: readFileSync(join(certs, 'server-key.pem')),
    cert: readFileSync(join(certs, 'server-cert.pem')),
    ca: readFileSync(join(certs, 'ca.pem')),
    requestCert: true,
    rejectUnauthorized: true,
    allowHalfOpen: true,
  });
  server.on('tlsClientError', () => undefined);
  const relay = relayTo(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { ...relay, port: (server.address() as AddressInfo).port };
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker endpoint on the real engine'), () => {
  const installationId = testInstallationId();
  const providers: Provider[] = [];
  const relays: Relay[] = [];
  let dir: string;

  const provider = (endpoint: DockerEndpoint) => {
    const p = createDockerProvider({ endpoint, installationId });
    providers.push(p);
    return p;
  };
  const tap = async () => {
    const t = await unixRelay(join(tempDir('sbx-ep-tap-'), 'engine.sock'));
    relays.push(t);
    return t;
  };
  /** Spawns, runs a command (with stdin, so a hijacked connection too), reads a file back, destroys. */
  const roundTrip = async (p: Provider) => {
    const { runtime_id } = await p.spawn({
      sandbox_id: `sb-ep${randomBytes(4).toString('hex')}`,
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    });
    try {
      const r = await collect(
        p.exec(
          runtime_id,
          { command: 'sh', args: ['-c', 'echo "got $(cat)"'], mode: 'argv', env: {}, stdin: Buffer.from('stdin bytes') },
          never,
        ),
      );
      expect({ stderr: r.stderr, exitCode: r.exitCode, stdout: r.stdout }).toEqual({
        exitCode: 0,
        stdout: 'got stdin bytes\n',
        stderr: '',
      });
      await p.writeFile(runtime_id, '/workspace/f.txt', Buffer.from('via endpoint'), undefined);
      expect(Buffer.from(await p.readFile(runtime_id, '/workspace/f.txt')).toString()).toBe('via endpoint');
    } finally {
      await p.destroy(runtime_id);
    }
  };

  beforeAll(async () => {
    await requireEngine();
    dir = tempDir('sbx-ep-');
  });
  afterAll(async () => {
    for (const r of relays) await r.close();
    await removeInstallation(await requireEngine(), installationId);
  });

  it('DOCKER_HOST=unix://… is the engine sbx talks to', async () => {
    const t = await tap();
    const endpoint = resolveDockerEndpoint({ env: { DOCKER_HOST: `unix://${t.path}` }, home: dir });
    expect(endpoint.description).toBe(`unix://${t.path} (DOCKER_HOST)`);
    const p = provider(endpoint);
    expect(await p.health()).toMatchObject({ healthy: true });
    await roundTrip(p);
    expect(t.accepted()).toBeGreaterThan(0);
    expect(p.config().endpoint).toBe(endpoint.description);
  });

  it('the current docker context (config.json currentContext → meta.json) is the engine sbx talks to', async () => {
    const t = await tap();
    const cfg = tempDir('sbx-ep-ctx-');
    writeFileSync(join(cfg, 'config.json'), JSON.stringify({ currentContext: 'sbx-test' }));
    writeContext(cfg, 'sbx-test', `unix://${t.path}`);
    const endpoint = resolveDockerEndpoint({ env: { DOCKER_CONFIG: cfg }, home: dir });
    expect(endpoint.source).toBe('docker context "sbx-test"');
    const p = provider(endpoint);
    expect(await p.health()).toMatchObject({ healthy: true });
    await roundTrip(p);
    expect(t.accepted()).toBeGreaterThan(0);
  });

  describe('tcp with TLS through a relay that requires client certificates', () => {
    let certs: string;
    let relay: Awaited<ReturnType<typeof tlsRelay>>;
    beforeAll(async () => {
      certs = tempDir('sbx-ep-tls-');
      makeCerts(certs);
      relay = await tlsRelay(certs);
    });
    afterAll(async () => relay?.close());

    it('DOCKER_HOST=tcp:// with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH reaches the engine', async () => {
      const endpoint = resolveDockerEndpoint({
        env: { DOCKER_HOST: `tcp://127.0.0.1:${relay.port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs },
        home: dir,
      });
      expect(endpoint.description).toBe(`tcp://127.0.0.1:${relay.port} over TLS (DOCKER_HOST)`);
      const before = relay.accepted();
      const p = provider(endpoint);
      expect(await p.health()).toMatchObject({ healthy: true });
      await roundTrip(p);
      expect(relay.accepted()).toBeGreaterThan(before);
    });

    it('a context with TLS material under contexts/tls/<sha>/docker reaches the engine', async () => {
      const cfg = tempDir('sbx-ep-tlsctx-');
      const pem = (f: string) => readFileSync(join(certs, f), 'utf8');
      writeContext(cfg, 'remote', `tcp://localhost:${relay.port}`, {
        'ca.pem': pem('ca.pem'),
        'cert.pem': pem('cert.pem'),
        'key.pem': pem('key.pem'),
      });
      const endpoint = resolveDockerEndpoint({ env: { DOCKER_CONFIG: cfg, DOCKER_CONTEXT: 'remote' }, home: dir });
      expect(endpoint).toMatchObject({
        kind: 'tcp',
        host: 'localhost',
        port: relay.port,
        tls: { verify: true },
        source: 'docker context "remote"',
      });
      const p = provider(endpoint);
      expect(await p.health()).toMatchObject({ healthy: true });
      await roundTrip(p);
    });

    it('without a client certificate, or with a CA that does not match, docker is unhealthy', async () => {
      const noClient = tempDir('sbx-ep-nocert-');
      writeFileSync(join(noClient, 'ca.pem'), readFileSync(join(certs, 'ca.pem')));
      const a = provider(
        resolveDockerEndpoint({
          env: { DOCKER_HOST: `tcp://127.0.0.1:${relay.port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: noClient },
          home: dir,
        }),
      );
      expect(await a.health()).toMatchObject({
        healthy: false,
        error: `docker engine unreachable at tcp://127.0.0.1:${relay.port} over TLS (DOCKER_HOST)`,
      });
      const otherCa = tempDir('sbx-ep-otherca-');
      makeCerts(otherCa);
      for (const f of ['cert.pem', 'key.pem']) writeFileSync(join(otherCa, f), readFileSync(join(certs, f)));
      const b = provider(
        resolveDockerEndpoint({
          env: { DOCKER_HOST: `tcp://127.0.0.1:${relay.port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: otherCa },
          home: dir,
        }),
      );
      expect((await b.health()).healthy).toBe(false);
    });

    it('DOCKER_TLS without DOCKER_TLS_VERIFY: TLS with the client certificate, server not verified', async () => {
      const unverified = tempDir('sbx-ep-noverify-');
      // Client certificate only: no CA to check the server against.
      for (const f of ['cert.pem', 'key.pem']) writeFileSync(join(unverified, f), readFileSync(join(certs, f)));
      const endpoint = resolveDockerEndpoint({
        env: { DOCKER_HOST: `tcp://127.0.0.1:${relay.port}`, DOCKER_TLS: '1', DOCKER_CERT_PATH: unverified },
        home: dir,
      });
      expect(endpoint).toMatchObject({ kind: 'tcp', tls: { verify: false } });
      expect(endpoint.kind === 'tcp' && endpoint.tls?.ca).toBeUndefined();
      const p = provider(endpoint);
      expect(await p.health()).toMatchObject({ healthy: true });
      await roundTrip(p);
      // The same files with verification on fail: the test CA is not a trusted root.
      const verified = provider(
        resolveDockerEndpoint({
          env: { DOCKER_HOST: `tcp://127.0.0.1:${relay.port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: unverified },
          home: dir,
        }),
      );
      expect((await verified.health()).healthy).toBe(false);
    });
  });

  it('a DOCKER_HOST that points nowhere is unhealthy and never another engine', async () => {
    const endpoint = resolveDockerEndpoint({ env: { DOCKER_HOST: 'unix:///nowhere.sock' }, home: dir });
    const p = provider(endpoint);
    expect(await p.health()).toMatchObject({ healthy: false, error: 'docker engine unreachable at unix:///nowhere.sock (DOCKER_HOST)' });
  });

  describe('serve and the control plane read DOCKER_HOST from the environment', () => {
    const saved = process.env.DOCKER_HOST;
    afterEach(() => {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    });

    it(
      'providers.default: docker with DOCKER_HOST nowhere: docker listed unhealthy, /ready 503, no spawn on ' + 'the default socket',
      async () => {
        process.env.DOCKER_HOST = 'unix:///nowhere.sock';
        const srv = await startTestServer({ providers: { default: 'docker' } });
        try {
          const list = await call(srv.url, 'GET', '/api/v1/providers');
          expect(list.body).toHaveLength(1);
          expect(list.body[0]).toMatchObject({
            name: 'docker',
            healthy: false,
            default: true,
            error: 'docker engine unreachable at unix:///nowhere.sock (DOCKER_HOST)',
          });
          expect((await call(srv.url, 'GET', '/api/v1/providers/docker')).body.config.endpoint).toBe('unix:///nowhere.sock (DOCKER_HOST)');
          const ready = await call(srv.url, 'GET', '/api/v1/ready');
          expect(ready.status).toBe(503);
          expect(ready.body.ready_providers).toBe(0);
          const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes', { image: TEST_IMAGE });
          expect(spawn.status).toBeGreaterThanOrEqual(500);
          const docker = await requireEngine();
          const ours = await docker.listContainers({
            all: true,
            filters: { label: [`${LABEL_INSTALLATION}=${srv.plane.installationId}`] },
          });
          expect(ours).toEqual([]);
        } finally {
          await srv.close();
        }
      },
    );

    it('auto with DOCKER_HOST nowhere does not fall back to the default socket', async () => {
      process.env.DOCKER_HOST = 'unix:///nowhere.sock';
      const srv = await startTestServer({ providers: { default: 'auto', proot: { rootfs: '' } } });
      try {
        expect((await call(srv.url, 'GET', '/api/v1/providers')).body).toEqual([]);
        expect((await call(srv.url, 'GET', '/api/v1/ready')).status).toBe(503);
      } finally {
        await srv.close();
      }
    });

    it('DOCKER_HOST=ssh:// with providers.default: docker: unhealthy with the reason, spawns 503', async () => {
      process.env.DOCKER_HOST = 'ssh://me@box';
      const srv = await startTestServer({ providers: { default: 'docker' } });
      try {
        const [docker] = (await call(srv.url, 'GET', '/api/v1/providers')).body;
        expect(docker).toMatchObject({ name: 'docker', healthy: false });
        expect(docker.error).toMatch(/^DOCKER_HOST: unsupported docker host scheme "ssh:\/\/"/);
        const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
        expect(spawn.status).toBe(503);
        expect(spawn.body.code).toBe('unavailable');
        expect(spawn.body.message).toMatch(/unsupported docker host scheme "ssh:\/\/"/);
      } finally {
        await srv.close();
      }
    });

    it('serve names the endpoint and why on its start line', async () => {
      const t = await tap();
      process.env.DOCKER_HOST = `unix://${t.path}`;
      const home = tempDir('sbx-ep-serve-');
      writeFileSync(
        join(home, 'sbx.yaml'),
        `server:\n  port: 0\ndatabase:\n  driver: sqlite\n  path: ${join(home, 'sbx.db')}\nproviders:\n  ` +
          `default: docker\nlogging:\n  level: info\n  format: json\n`,
      );
      const logged: string[] = [];
      const write = process.stderr.write.bind(process.stderr);
      process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
        logged.push(chunk.toString());
        return write(chunk, ...rest);
      }) as typeof process.stderr.write;
      const stop = new AbortController();
      const sink = new Writable({ write: (_c, _e, cb) => cb() });
      try {
        let url = '';
        const running = runServe({
          config: join(home, 'sbx.yaml'),
          cwd: home,
          home,
          env: { HOME: home },
          stdout: sink,
          stderr: sink,
          signal: stop.signal,
          onListening: (u) => (url = u),
        });
        for (let i = 0; i < 200 && !url; i++) await new Promise((r) => setTimeout(r, 50));
        expect(url).not.toBe('');
        expect((await call(url, 'GET', '/api/v1/ready')).status).toBe(200);
        stop.abort();
        expect(await running).toBe(0);
      } finally {
        process.stderr.write = write;
        stop.abort();
      }
      const start = logged.map((l) => l.trim()).find((l) => l.includes('listening on'));
      expect(start).toBeDefined();
      expect((JSON.parse(start!) as { msg: string }).msg).toContain(
        `(provider: docker, docker: unix://${t.path} (DOCKER_HOST), store: sqlite`,
      );
      expect(t.accepted()).toBeGreaterThan(0);
    });
  });

  afterAll(async () => {
    for (const p of providers) await p.close?.();
  });
});
