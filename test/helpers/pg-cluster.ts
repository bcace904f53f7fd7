/**
 * A PostgreSQL server of a suite's own (Debian `postgresql` binaries, initdb in a temp dir), so a
 * suite can stop and start it without touching the shared test database other suites use.
 * Needs root (the server runs as the `postgres` user) and the postgresql package.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

export interface PgCluster {
  dsn: string;
  port: number;
  /** Fast shutdown: every connection is cut, new ones are refused. */
  stop(): void;
  start(): void;
  destroy(): void;
}

/** Why a private cluster cannot run here, or null. */
export function pgClusterUnavailable(): string | null {
  if (!process.env.SBX_TEST_POSTGRES_DSN) return 'skipped unless SBX_TEST_POSTGRES_DSN is set (PostgreSQL installed)';
  if (process.getuid?.() !== 0) return 'needs root to run a private PostgreSQL server as the postgres user';
  if (!binDir()) return 'no PostgreSQL server binaries under /usr/lib/postgresql';
  return null;
}

function binDir(): string | null {
  if (!existsSync('/usr/lib/postgresql')) return null;
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(join('/usr/lib/postgresql', v, 'bin', 'pg_ctl'))) return join('/usr/lib/postgresql', v, 'bin');
  return null;
}

function postgresUid(): { uid: number; gid: number } {
  const line = execFileSync('getent', ['passwd', 'postgres']).toString().trim().split(':');
  return { uid: Number(line[2]), gid: Number(line[3]) };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startPgCluster(): Promise<PgCluster> {
  const bin = binDir()!;
  // Not under the suite's TMPDIR: that one is private to root, and the server runs as postgres.
  const dir = mkdtempSync('/tmp/sbx-pg-');
  const { uid, gid } = postgresUid();
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const asPostgres = (cmd: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { cwd: dir, stdio: 'pipe', timeout: 60_000 });
  asPostgres('initdb', ['-D', data, '--auth=trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const opts =
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c ` +
    `full_page_writes=off -c max_connections=200`;
  const cluster: PgCluster = {
    dsn: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: () => void asPostgres('pg_ctl', ['-D', data, '-o', opts, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']),
    stop: () => void asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '30', 'stop']),
    destroy: () => {
      try {
        cluster.stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  cluster.start();
  return cluster;
}
