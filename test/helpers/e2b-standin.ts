/**
 * A local stand-in for E2B's hosted API and its in-sandbox daemon (envd), so the hosted provider
 * runs its contract suites over real HTTP on machines that cannot reach E2B. It follows the
 * documented wire shapes, and simplifies what the provider cannot observe:
 *
 * Followed (e2b-dev/infra spec/openapi.yml; packages/envd/spec/{envd.yaml, process/process.proto,
 * filesystem/filesystem.proto}; e2b-dev/E2B packages/js-sdk):
 * - REST with `X-API-Key` (401 `{code, message}` without it): `POST /sandboxes {templateID, timeout,
 *   metadata, envVars, secure, allow_internet_access}` → 201 `Sandbox {templateID, sandboxID,
 *   clientID, envdVersion, envdAccessToken (when secure), domain}`; `GET /sandboxes?metadata=k%3Dv%26…`
 *   → `ListedSandbox[]` of running sandboxes; `GET /sandboxes/{id}` → `SandboxDetail` or 404;
 *   `DELETE /sandboxes/{id}` → 204 or 404; `POST /sandboxes/{id}/timeout {timeout}` → 204, and a
 *   sandbox past its timeout is killed.
 * - envd with `X-Access-Token` when the sandbox has a token (401 otherwise) and the user as
 *   `Authorization: Basic base64(user:)`: Connect RPCs with the JSON codec — unary (`application/json`,
 *   errors as HTTP status + `{code, message}`) and the server stream `/process.Process/Start`
 *   (`application/connect+json`, 5-byte envelopes, end-stream frame flagged 0x02). Process events
 *   `start {pid}`, `data {stdout|stderr: base64}` (≤ 32 KiB), `end {exitCode, exited, status, error}`
 *   with Go's ProcessState semantics (a signal death is exitCode -1, status `signal: killed`), and
 *   `keepalive {}` every `Keepalive-Ping-Interval` seconds when the request asks; a missing cwd is
 *   `invalid_argument`. `SendInput`, `CloseStdin`, `SendSignal` (SIGTERM/SIGKILL only,
 *   one pid, as envd). Filesystem `Stat`, `ListDir {path, depth}`, `MakeDir` (`already_exists`),
 *   `Move`, `Remove` (removes recursively; a missing path is not an error), EntryInfo with Go's
 *   os.FileMode in `mode`, its String() in `permissions`, int64 `size` as a JSON string.
 *   `GET /files?path=&username=` → the bytes or 404; `POST /files` multipart `file` part → the
 *   file replaced whole, parents created, a new file 0644, an existing one keeping its mode.
 *
 * Simplified:
 * - envd is reached at `<server>/envd/<sandboxID>` (tests pass the provider an `envdUrl`), not
 *   `https://49983-<sandboxID>.<domain>`; an unknown sandbox there answers 502 as E2B's proxy does.
 * - A "sandbox" is a temp directory on this host: envd paths map into it, commands run on this host
 *   with their cwd inside it (they see host paths and the host's binaries; no VM, no isolation, no
 *   user switch: the Basic user is checked, not applied). Templates are accepted by name only.
 * - No pagination, no pause/resume, no metrics, no logs endpoints; one process per pid, no tags.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { firstPart, goMode, HTTP_OF, readBody, RpcError, sendJson } from './e2b-standin-wire.js';

interface Sandbox {
  id: string;
  dir: string;
  token?: string;
  templateID: string;
  metadata: Record<string, string>;
  startedAt: Date;
  endAt: Date;
  timer: NodeJS.Timeout;
  procs: Map<number, ChildProcess>;
}

export interface StandinOptions {
  apiKey: string;
}

export interface Standin {
  url: string;
  envdUrl: (sandboxId: string) => string;
  /** Requests seen, for shape assertions: method, path, headers, JSON body when there was one. */
  requests: Array<{ method: string; path: string; headers: IncomingMessage['headers']; body?: unknown }>;
  sandboxes: Map<string, Sandbox>;
  close(): Promise<void>;
}

export async function startE2bStandin(opts: StandinOptions): Promise<Standin> {
  const root = await mkdtemp(join(tmpdir(), 'sbx-e2b-standin-'));
  const sandboxes = new Map<string, Sandbox>();
  const requests: Standin['requests'] = [];

  const kill = async (sb: Sandbox) => {
    clearTimeout(sb.timer);
    sandboxes.delete(sb.id);
    for (const p of sb.procs.values()) p.kill('SIGKILL');
    await rm(sb.dir, { recursive: true, force: true });
  };

  /** A sandbox path (absolute) inside the sandbox's directory; `..` cannot leave it. */
  const hostPath = (sb: Sandbox, p: string): string => {
    if (typeof p !== 'string' || p.length === 0) throw new RpcError('invalid_argument', 'path is required');
    const norm = posix.normalize(posix.join('/', p));
    return norm === '/' ? sb.dir : join(sb.dir, norm);
  };
  const sandboxPath = (sb: Sandbox, host: string): string => (host === sb.dir ? '/' : host.slice(sb.dir.length));

  const entry = async (sb: Sandbox, host: string) => {
    let st: Stats;
    try {
      st = await lstat(host);
    } catch {
      throw new RpcError('not_found', 'file not found');
    }
    const path = sandboxPath(sb, host);
    return {
      name: path === '/' ? '/' : posix.basename(path),
      type: st.isDirectory() ? 'FILE_TYPE_DIRECTORY' : st.isSymbolicLink() ? 'FILE_TYPE_SYMLINK' : 'FILE_TYPE_FILE',
      path,
      size: String(st.size),
      ...goMode(st),
      owner: String(st.uid),
      group: String(st.gid),
      modifiedTime: st.mtime.toISOString(),
    };
  };

  const listed = (sb: Sandbox) => ({
    templateID: sb.templateID,
    sandboxID: sb.id,
    clientID: 'standin',
    startedAt: sb.startedAt.toISOString(),
    endAt: sb.endAt.toISOString(),
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    metadata: sb.metadata,
    state: 'running',
    envdVersion: '0.2.0',
  });

  const setTimer = (sb: Sandbox, seconds: number) => {
    clearTimeout(sb.timer);
    sb.endAt = new Date(Date.now() + seconds * 1000);
    sb.timer = setTimeout(() => void kill(sb), seconds * 1000);
    sb.timer.unref();
  };

  async function rest(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const raw = await readBody(req);
    const body = raw.length ? (JSON.parse(raw.toString()) as Record<string, unknown>) : undefined;
    requests.push({ method: req.method!, path: url.pathname + url.search, headers: req.headers, body });
    if (req.headers['x-api-key'] !== opts.apiKey) return sendJson(res, 401, { code: 401, message: 'Invalid API key' });
    const m = /^\/sandboxes(?:\/([^/]+))?(\/timeout)?$/.exec(url.pathname);
    if (!m) return sendJson(res, 404, { code: 404, message: 'no such route' });
    const [, id, timeout] = m;
    if (!id && req.method === 'POST') {
      if (typeof body?.templateID !== 'string') return sendJson(res, 400, { code: 400, message: 'templateID is required' });
      const sid = 'i' + randomBytes(10).toString('hex');
      const dir = await mkdtemp(join(root, `${sid}-`));
      await mkdir(join(dir, 'tmp'), { mode: 0o1777 });
      await mkdir(join(dir, 'home', 'user'), { recursive: true });
      const sb: Sandbox = {
        id: sid,
        dir,
        templateID: body.templateID,
        metadata: (body.metadata as Record<string, string>) ?? {},
        startedAt: new Date(),
        endAt: new Date(),
        timer: setTimeout(() => undefined, 0),
        procs: new Map(),
      };
      if (body.secure === true) sb.token = randomBytes(16).toString('hex');
      setTimer(sb, typeof body.timeout === 'number' ? body.timeout : 15);
      sandboxes.set(sid, sb);
      return sendJson(res, 201, {
        templateID: sb.templateID,
        sandboxID: sid,
        clientID: 'standin',
        envdVersion: '0.2.0',
        envdAccessToken: sb.token,
        domain: null,
      });
    }
    if (!id && req.method === 'GET') {
      const filter = new URLSearchParams(url.searchParams.get('metadata') ?? '');
      const all = [...sandboxes.values()].filter((sb) => [...filter].every(([k, v]) => sb.metadata[k] === v));
      return sendJson(res, 200, all.map(listed));
    }
    const sb = id ? sandboxes.get(id) : undefined;
    if (!sb) return sendJson(res, 404, { code: 404, message: `sandbox ${id} not found` });
    if (timeout && req.method === 'POST') {
      setTimer(sb, Number(body?.timeout ?? 0));
      return sendJson(res, 204);
    }
    if (req.method === 'GET') return sendJson(res, 200, { ...listed(sb), envdAccessToken: sb.token, domain: null });
    if (req.method === 'DELETE') {
      await kill(sb);
      return sendJson(res, 204);
    }
    return sendJson(res, 405, { code: 405, message: 'method not allowed' });
  }

  function frame(res: ServerResponse, message: unknown, flags = 0): boolean {
    const payload = Buffer.from(JSON.stringify(message));
    const head = Buffer.alloc(5);
    head[0] = flags;
    head.writeUInt32BE(payload.length, 1);
    return res.write(Buffer.concat([head, payload]));
  }

  /** `/process.Process/Start`: runs the command on this host with its cwd in the sandbox. */
  async function start(sb: Sandbox, raw: Buffer, res: ServerResponse, keepaliveS: number): Promise<void> {
    if (raw.length < 5 || raw.length !== 5 + raw.readUInt32BE(1)) throw new RpcError('invalid_argument', 'bad envelope');
    const msg = JSON.parse(raw.subarray(5).toString()) as {
      process?: { cmd?: string; args?: string[]; envs?: Record<string, string>; cwd?: string };
      stdin?: boolean;
    };
    const p = msg.process ?? {};
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    const cwd = hostPath(sb, p.cwd ?? '/home/user');
    const cwdOk = await stat(cwd).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!cwdOk || !p.cmd) {
      frame(res, { error: { code: 'invalid_argument', message: `cwd '${p.cwd}' does not exist` } }, 2);
      res.end();
      return;
    }
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: join(sb.dir, 'home', 'user'),
      USER: 'user',
      LOGNAME: 'user',
      ...(p.envs ?? {}),
    };
    const child = spawn(p.cmd, p.args ?? [], { cwd, env, stdio: [msg.stdin === false ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    child.stdin?.on('error', () => undefined);
    const onSpawnError = (): void => {
      frame(res, { error: { code: 'internal', message: 'error starting process' } }, 2);
      res.end();
    };
    child.once('error', onSpawnError);
    child.once('spawn', () => {
      child.removeListener('error', onSpawnError);
      const pid = child.pid!;
      sb.procs.set(pid, child);
      frame(res, { event: { start: { pid } } });
      const ping = keepaliveS > 0 ? setInterval(() => frame(res, { event: { keepalive: {} } }), keepaliveS * 1000) : undefined;
      const pump = (stream: NodeJS.ReadableStream, key: 'stdout' | 'stderr') =>
        stream.on('data', (c: Buffer) => {
          for (let off = 0; off < c.length; off += 32 * 1024) {
            if (!frame(res, { event: { data: { [key]: c.subarray(off, off + 32 * 1024).toString('base64') } } })) {
              stream.pause();
              res.once('drain', () => stream.resume());
            }
          }
        });
      pump(child.stdout!, 'stdout');
      pump(child.stderr!, 'stderr');
      child.once('close', (code, signal) => {
        sb.procs.delete(pid);
        clearInterval(ping);
        const sigName =
          signal === 'SIGKILL'
            ? 'killed'
            : signal === 'SIGTERM'
              ? 'terminated'
              : signal === 'SIGINT'
                ? 'interrupt'
                : signal
                  ? 'signal'
                  : undefined;
        const end = sigName
          ? { exitCode: -1, status: `signal: ${sigName}`, error: `signal: ${sigName}` }
          : code === 0
            ? { exited: true, status: 'exit status 0' }
            : { exitCode: code, exited: true, status: `exit status ${code}`, error: `exit status ${code}` };
        frame(res, { event: { end } });
        frame(res, {}, 2);
        res.end();
      });
    });
  }

  async function unary(sb: Sandbox, method: string, m: Record<string, unknown>): Promise<unknown> {
    const proc = () => {
      const pid = (m.process as { pid?: number } | undefined)?.pid;
      const child = pid === undefined ? undefined : sb.procs.get(pid);
      if (!child) throw new RpcError('not_found', `process with pid ${pid} not found`);
      return child;
    };
    switch (method) {
      case 'process.Process/SendInput': {
        const child = proc();
        const data = (m.input as { stdin?: string } | undefined)?.stdin ?? '';
        if (!child.stdin || child.stdin.writableEnded) throw new RpcError('internal', 'stdin not enabled or closed');
        await new Promise<void>((resolve) => child.stdin!.write(Buffer.from(data, 'base64'), () => resolve()));
        return {};
      }
      case 'process.Process/CloseStdin':
        proc().stdin?.end();
        return {};
      case 'process.Process/SendSignal': {
        const sig = m.signal === 'SIGNAL_SIGKILL' ? 'SIGKILL' : m.signal === 'SIGNAL_SIGTERM' ? 'SIGTERM' : undefined;
        if (!sig) throw new RpcError('unimplemented', `invalid signal: ${String(m.signal)}`);
        proc().kill(sig);
        return {};
      }
      case 'filesystem.Filesystem/Stat':
        return { entry: await entry(sb, hostPath(sb, m.path as string)) };
      case 'filesystem.Filesystem/ListDir': {
        const base = hostPath(sb, m.path as string);
        const st = await stat(base).catch(() => null);
        if (!st) throw new RpcError('not_found', 'directory not found');
        if (!st.isDirectory()) throw new RpcError('invalid_argument', 'path is not a directory');
        const depth = Math.max(1, Number(m.depth ?? 1));
        const entries: unknown[] = [];
        const walk = async (dir: string, level: number): Promise<void> => {
          for (const d of await readdir(dir, { withFileTypes: true })) {
            const full = join(dir, d.name);
            entries.push(await entry(sb, full));
            if (d.isDirectory() && level < depth) await walk(full, level + 1);
          }
        };
        await walk(base, 1);
        return { entries };
      }
      case 'filesystem.Filesystem/MakeDir': {
        const target = hostPath(sb, m.path as string);
        if (
          await lstat(target).then(
            () => true,
            () => false,
          )
        )
          throw new RpcError('already_exists', 'directory already exists');
        await mkdir(target, { recursive: true });
        return { entry: await entry(sb, target) };
      }
      case 'filesystem.Filesystem/Move': {
        const from = hostPath(sb, m.source as string);
        const to = hostPath(sb, m.destination as string);
        await lstat(from).catch(() => {
          throw new RpcError('not_found', 'source not found');
        });
        await mkdir(posix.dirname(to), { recursive: true });
        await rename(from, to);
        return { entry: await entry(sb, to) };
      }
      case 'filesystem.Filesystem/Remove':
        await rm(hostPath(sb, m.path as string), { recursive: true, force: true });
        return {};
      default:
        throw new RpcError('unimplemented', `${method} is not implemented`);
    }
  }

  async function files(sb: Sandbox, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const user = url.searchParams.get('username');
    if (user !== null && user !== 'root' && user !== 'user') return sendJson(res, 401, { code: 401, message: 'invalid user' });
    const target = hostPath(sb, url.searchParams.get('path') ?? '');
    if (req.method === 'GET') {
      const st = await stat(target).catch(() => null);
      if (!st) return sendJson(res, 404, { code: 404, message: 'file not found' });
      if (st.isDirectory()) return sendJson(res, 400, { code: 400, message: 'path is a directory' });
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(st.size) });
      createReadStream(target).pipe(res);
      return;
    }
    if (req.method === 'POST') {
      const content = firstPart(await readBody(req), req.headers['content-type'] ?? '');
      if ((await stat(target).catch(() => null))?.isDirectory()) return sendJson(res, 400, { code: 400, message: 'path is a directory' });
      await mkdir(posix.dirname(target), { recursive: true });
      await writeFile(target, content, { mode: 0o644 });
      return sendJson(res, 200, [{ path: sandboxPath(sb, target), name: posix.basename(target), type: 'file' }]);
    }
    return sendJson(res, 405, { code: 405, message: 'method not allowed' });
  }

  async function envd(req: IncomingMessage, res: ServerResponse, url: URL, id: string, rest: string): Promise<void> {
    const sb = sandboxes.get(id);
    if (!sb) {
      await readBody(req).catch(() => undefined);
      return sendJson(res, 502, { sandboxId: id, message: 'The sandbox was not found', code: 502 });
    }
    if (sb.token && req.headers['x-access-token'] !== sb.token) {
      await readBody(req).catch(() => undefined);
      return sendJson(res, 401, { code: 'unauthenticated', message: 'invalid access token' });
    }
    const auth = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const basicUser = auth ? Buffer.from(auth, 'base64').toString().split(':')[0] : undefined;
    if (rest === '/files') return files(sb, req, res, url);
    if (basicUser !== undefined && basicUser !== 'root' && basicUser !== 'user')
      return sendJson(res, 401, { code: 'unauthenticated', message: 'invalid user' });
    const raw = await readBody(req);
    requests.push({ method: req.method!, path: `/envd${rest}`, headers: req.headers });
    const method = rest.slice(1);
    if (method === 'process.Process/Start') {
      if (!String(req.headers['content-type']).startsWith('application/connect+json'))
        return sendJson(res, 415, { code: 'invalid_argument', message: 'unsupported content type' });
      return start(sb, raw, res, Number(req.headers['keepalive-ping-interval'] ?? 0));
    }
    if (!String(req.headers['content-type']).startsWith('application/json'))
      return sendJson(res, 415, { code: 'invalid_argument', message: 'unsupported content type' });
    const msg = JSON.parse(raw.toString() || '{}') as Record<string, unknown>;
    return sendJson(res, 200, await unary(sb, method, msg));
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://standin');
    const m = /^\/envd\/([^/]+)(\/.*)$/.exec(url.pathname);
    const handled = m ? envd(req, res, url, m[1]!, m[2]!) : rest(req, res, url);
    handled.catch((err: unknown) => {
      const code = err instanceof RpcError ? err.code : 'internal';
      if (res.headersSent) {
        res.end();
        return;
      }
      sendJson(res, HTTP_OF[code] ?? 500, { code, message: err instanceof Error ? err.message : 'internal error' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    envdUrl: (id) => `${url}/envd/${id}`,
    requests,
    sandboxes,
    close: async () => {
      for (const sb of [...sandboxes.values()]) await kill(sb);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
    },
  };
}
