/**
 * A stand-in for the guest agent and for Firecracker's vsock UDS, for tests: it listens on the
 * vsock socket path, answers `CONNECT <port>\n` with `OK <hostport>\n` as Firecracker does (a
 * wrong port: the connection is closed), then speaks the agent protocol
 * (docs/providers/firecracker.md) honestly: commands really run (on this host, in `root`), files
 * really live under `root`, which stands for the guest's `/`. It needs no root and no build, so the
 * fake-VM suites run anywhere; the real guest agent (`sbx-agent --vsock-guest`) is held to the same
 * contract in provider-firecracker-guest.test.ts and firecracker-guest-agent.test.ts.
 */
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { chmod, lstat, mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, join, normalize } from 'node:path';
import { AGENT_VSOCK_PORT, encodeFrame, type Frame, FrameReader } from '../../src/adapters/providers/firecracker/agent-protocol.js';

export interface FakeAgent {
  server: Server;
  close(): Promise<void>;
}

const fmtMode = (m: number) => '0' + (m & 0o7777).toString(8).padStart(3, '0');

class GuestError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function errnoToGuest(err: unknown, path: string): GuestError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return new GuestError('not_found', `${path}: no such file or directory`);
  if (code === 'EISDIR') return new GuestError('bad_request', `${path} is a directory`);
  if (code === 'ENOTEMPTY') return new GuestError('conflict', `${path} is not empty`);
  if (code === 'EEXIST') return new GuestError('conflict', `${path} exists`);
  return new GuestError('internal_guest_error', `${path}: ${code ?? 'error'}`);
}

export async function startFakeAgent(udsPath: string, root: string): Promise<FakeAgent> {
  const host = (p: unknown): string => {
    if (typeof p !== 'string' || !p.startsWith('/')) throw new GuestError('bad_request', 'paths are absolute');
    const n = normalize(p);
    if (n.split('/').includes('..')) throw new GuestError('bad_request', 'path escapes /');
    return join(root, n);
  };
  const info = async (guestPath: string) => {
    const st = await stat(host(guestPath)).catch((e: unknown) => {
      throw errnoToGuest(e, guestPath);
    });
    const name = guestPath === '/' ? '/' : guestPath.split('/').pop()!;
    return {
      name,
      path: guestPath,
      size: st.isDirectory() ? 0 : st.size,
      is_dir: st.isDirectory(),
      mod_time: st.mtime.toISOString(),
      mode: fmtMode(st.mode),
    };
  };

  async function serve(sock: Socket, reader: FrameReader): Promise<void> {
    const first = await reader.next(10_000);
    if (!first) return;
    const h = first.header;
    const ok = (extra: Record<string, unknown> = {}) => sock.write(encodeFrame({ type: 'ok', ...extra }));
    try {
      switch (h.op) {
        case 'ping':
          return void ok();
        case 'stat':
          return void ok({ info: await info(String(h.path)) });
        case 'list': {
          const p = String(h.path);
          const names = await readdir(host(p)).catch((e: unknown) => {
            throw errnoToGuest(e, p);
          });
          const entries = [];
          for (const n of names.sort()) entries.push(await info(p === '/' ? `/${n}` : `${p}/${n}`));
          return void ok({ entries });
        }
        case 'delete': {
          const p = host(h.path);
          const st = await lstat(p).catch((e: unknown) => {
            throw errnoToGuest(e, String(h.path));
          });
          if (st.isDirectory() && h.recursive !== true && (await readdir(p)).length > 0)
            throw new GuestError('bad_request', `${String(h.path)} is a directory that is not empty`);
          await rm(p, { recursive: true, force: true });
          return void ok();
        }
        case 'move':
          await mkdir(dirname(host(h.to)), { recursive: true });
          await rename(host(h.from), host(h.to)).catch((e: unknown) => {
            throw errnoToGuest(e, String(h.from));
          });
          return void ok();
        case 'chmod':
          await chmod(host(h.path), Number(h.mode)).catch((e: unknown) => {
            throw errnoToGuest(e, String(h.path));
          });
          return void ok();
        case 'write': {
          const parts: Buffer[] = [];
          for (;;) {
            const f = await reader.next(10_000);
            if (!f) return;
            if (f.header.type === 'end') break;
            parts.push(f.data);
          }
          const p = host(h.path);
          await mkdir(dirname(p), { recursive: true });
          await writeFile(p, Buffer.concat(parts), { mode: typeof h.mode === 'number' ? h.mode : 0o644 }).catch((e: unknown) => {
            throw errnoToGuest(e, String(h.path));
          });
          if (typeof h.mode === 'number') await chmod(p, h.mode);
          return void ok();
        }
        case 'read': {
          const st = await stat(host(h.path)).catch((e: unknown) => {
            throw errnoToGuest(e, String(h.path));
          });
          if (st.isDirectory()) throw new GuestError('bad_request', `${String(h.path)} is a directory`);
          if (typeof h.max_bytes === 'number' && st.size > h.max_bytes) {
            return void sock.write(
              encodeFrame({ type: 'error', code: 'payload_too_large', size: st.size, message: `the file is ${st.size} bytes` }),
            );
          }
          sock.write(encodeFrame({ type: 'file', size: st.size }));
          for await (const c of createReadStream(host(h.path), { highWaterMark: 64 * 1024 }))
            sock.write(encodeFrame({ type: 'data' }, c as Buffer));
          sock.write(encodeFrame({ type: 'end' }));
          return;
        }
        case 'exec':
          return await exec(sock, reader, first);
        default:
          throw new GuestError('bad_request', `unknown op ${String(h.op)}`);
      }
    } catch (err) {
      const e = err instanceof GuestError ? err : new GuestError('internal_guest_error', (err as Error).message);
      sock.write(encodeFrame({ type: 'error', code: e.code, message: e.message }));
    }
  }

  async function exec(sock: Socket, reader: FrameReader, first: Frame): Promise<void> {
    const h = first.header;
    const argv = h.argv as string[];
    const cwd = typeof h.cwd === 'string' ? host(h.cwd) : root;
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...(h.env as Record<string, string>) };
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let exited = false;
    const done = new Promise<number>((resolve) => {
      // What the agent owes an argv command it cannot start: the message on stderr, 127 or 126.
      child.once('error', (err: NodeJS.ErrnoException) => {
        const denied = err.code === 'EACCES';
        sock.write(
          encodeFrame({ type: 'stderr' }, Buffer.from(`sbx: ${denied ? 'permission denied' : 'command not found'}: ${argv[0]}\n`)),
        );
        resolve(denied ? 126 : 127);
      });
      child.once('close', (code, sig) => resolve(code ?? 128 + (sig === 'SIGKILL' ? 9 : sig === 'SIGTERM' ? 15 : 1)));
    });
    child.stdout.on('data', (c: Buffer) => sock.write(encodeFrame({ type: 'stdout' }, c)));
    child.stderr.on('data', (c: Buffer) => sock.write(encodeFrame({ type: 'stderr' }, c)));
    child.stdin.on('error', () => undefined);
    const kill = (sig: NodeJS.Signals) => {
      if (!exited && child.pid) {
        try {
          process.kill(-child.pid, sig);
        } catch {
          // already gone
        }
      }
    };
    void (async () => {
      for (;;) {
        const f = await reader.next(Infinity).catch(() => null);
        if (!f) return kill('SIGKILL'); // the host went away: the command goes too
        if (f.header.type === 'stdin') child.stdin.write(f.data);
        else if (f.header.type === 'stdin_end') child.stdin.end();
        else if (f.header.type === 'signal') kill(String(f.header.signal) as NodeJS.Signals);
      }
    })();
    const code = await done;
    exited = true;
    sock.write(encodeFrame({ type: 'exit', exit_code: code }));
  }

  const open = new Set<Socket>();
  const server = createServer((sock) => {
    open.add(sock);
    sock.once('close', () => open.delete(sock));
    sock.on('error', () => undefined);
    let line = '';
    const onData = (c: Buffer) => {
      line += c.toString('latin1');
      const nl = line.indexOf('\n');
      if (nl === -1) return;
      sock.off('data', onData);
      sock.pause();
      if (line.slice(0, nl) !== `CONNECT ${AGENT_VSOCK_PORT}`) return void sock.destroy();
      sock.write('OK 1073741824\n');
      const rest = Buffer.from(line.slice(nl + 1), 'latin1');
      if (rest.length) sock.unshift(rest);
      void serve(sock, new FrameReader(sock, 'the host')).catch(() => sock.destroy());
    };
    sock.on('data', onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(udsPath, () => resolve());
  });
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
