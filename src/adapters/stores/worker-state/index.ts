/**
 * The worker's state in SQLite (better-sqlite3) at `worker.state_path`: synchronous, one small file
 * per worker, 0600 in a 0700 directory (it names runtimes and lease generations).
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { EgressLists } from '../../../core/network/rules.js';
import type { WorkerRuntime, WorkerState } from '../../../core/scheduler/worker-state-port.js';

type Row = Omit<WorkerRuntime, 'egress'> & { egress: string | null };

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lease_generations (resource_id TEXT PRIMARY KEY, generation INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runtimes (sandbox_id TEXT PRIMARY KEY, provider TEXT NOT NULL, runtime_id TEXT NOT NULL);
`;

export function openWorkerState(path: string): WorkerState {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Database(path);
  try {
    chmodSync(path, 0o600);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.exec(SCHEMA);
    // Added after the first release of the file: older state files get the column.
    const cols = db.prepare<[], { name: string }>('PRAGMA table_info(runtimes)').all();
    if (!cols.some((c) => c.name === 'preview_token')) db.exec('ALTER TABLE runtimes ADD COLUMN preview_token TEXT');
    if (!cols.some((c) => c.name === 'network')) db.exec('ALTER TABLE runtimes ADD COLUMN network TEXT');
    if (!cols.some((c) => c.name === 'egress')) db.exec('ALTER TABLE runtimes ADD COLUMN egress TEXT');
  } catch (err) {
    db.close();
    throw err;
  }
  const q = {
    getMeta: db.prepare<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
    setMeta: db.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value'),
    gen: db.prepare<[string], { generation: number }>('SELECT generation FROM lease_generations WHERE resource_id = ?'),
    // Atomic: the row moves only forward.
    observe: db.prepare(
      'INSERT INTO lease_generations (resource_id, generation) VALUES (?, ?) ON CONFLICT(resource_id) DO ' +
        'UPDATE SET generation = excluded.generation WHERE excluded.generation >= lease_generations.generation',
    ),
    put: db.prepare(
      'INSERT INTO runtimes (sandbox_id, provider, runtime_id, preview_token, network, egress) VALUES (?, ?, ' +
        '?, ?, ?, ?) ON CONFLICT(sandbox_id) DO UPDATE SET provider = excluded.provider, runtime_id = ' +
        'excluded.runtime_id, preview_token = excluded.preview_token, network = excluded.network, egress = excluded.egress',
    ),
    get: db.prepare<[string], Row>(
      'SELECT sandbox_id, provider, runtime_id, preview_token, network, egress FROM runtimes WHERE sandbox_id = ?',
    ),
    setEgress: db.prepare('UPDATE runtimes SET egress = ? WHERE sandbox_id = ?'),
    del: db.prepare('DELETE FROM runtimes WHERE sandbox_id = ?'),
    list: db.prepare<[], WorkerRuntime>('SELECT sandbox_id, provider, runtime_id FROM runtimes ORDER BY sandbox_id'),
    count: db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM runtimes'),
  };
  return {
    getMeta: (key) => q.getMeta.get(key)?.value ?? null,
    setMeta: (key, value) => void q.setMeta.run(key, value),
    generation: (id) => q.gen.get(id)?.generation ?? null,
    observeGeneration: (id, generation) => q.observe.run(id, generation).changes > 0,
    putRuntime: (rt) =>
      void q.put.run(
        rt.sandbox_id,
        rt.provider,
        rt.runtime_id,
        rt.preview_token ?? null,
        rt.network ?? null,
        rt.egress ? JSON.stringify(rt.egress) : null,
      ),
    getRuntime: (id) => {
      const r = q.get.get(id);
      return r ? { ...r, egress: r.egress ? (JSON.parse(r.egress) as EgressLists) : null } : null;
    },
    setEgress: (id, lists) => q.setEgress.run(JSON.stringify(lists), id).changes > 0,
    deleteRuntime: (id) => void q.del.run(id),
    listRuntimes: () => q.list.all(),
    countRuntimes: () => q.count.get()?.n ?? 0,
    close: () => db.close(),
  };
}
