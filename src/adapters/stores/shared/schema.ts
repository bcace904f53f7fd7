/**
 * The first version of the schema, written once for both dialects: the column types that differ
 * are the only parameters (SQLite's TEXT, INTEGER, REAL; PostgreSQL's byte-ordered TEXT, BIGINT,
 * DOUBLE PRECISION). Later versions are per dialect in each migrations file.
 */
export interface DialectTypes {
  /** Text that is sorted or range-compared: byte order in both stores. */
  key: string;
  /** 64-bit integers. */
  bigint: string;
  /** Floating point. */
  real: string;
}

export function initialSchema(t: DialectTypes): string {
  return `
      CREATE TABLE sandboxes (
        id ${t.key} PRIMARY KEY,
        state ${t.key} NOT NULL,
        provider TEXT NOT NULL,
        image TEXT NOT NULL,
        memory_mb INTEGER NOT NULL,
        vcpus INTEGER NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL,
        expires_at ${t.key} NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        owner_id ${t.key},
        worker_id ${t.key} NOT NULL,
        runtime_id TEXT,
        template TEXT
      );
      CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
      CREATE INDEX sandboxes_state_idx ON sandboxes (state, created_at, id);
      CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);
      CREATE INDEX sandboxes_worker_idx ON sandboxes (worker_id, created_at, id);

      CREATE TABLE templates (
        name ${t.key} PRIMARY KEY,
        image TEXT,
        memory_mb INTEGER,
        vcpus INTEGER,
        ttl TEXT,
        provider TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE owner_quotas (
        owner_id ${t.key} PRIMARY KEY,
        max_sandboxes INTEGER NOT NULL,
        max_ttl_ms ${t.bigint} NOT NULL,
        max_exec_timeout_ms ${t.bigint} NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE workers (
        id ${t.key} PRIMARY KEY,
        hostname TEXT NOT NULL,
        status TEXT NOT NULL,
        providers TEXT NOT NULL DEFAULT '[]',
        capabilities TEXT NOT NULL DEFAULT '[]',
        capacity TEXT NOT NULL DEFAULT '{}',
        last_heartbeat ${t.key} NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE leases (
        resource_id ${t.key} PRIMARY KEY,
        holder_id ${t.key} NOT NULL,
        generation ${t.bigint} NOT NULL,
        expires_at ${t.key} NOT NULL
      );
      CREATE INDEX leases_holder_idx ON leases (holder_id);

      CREATE TABLE admin_audit (
        id ${t.key} PRIMARY KEY,
        created_at ${t.key} NOT NULL,
        actor ${t.key} NOT NULL,
        method TEXT NOT NULL,
        path ${t.key} NOT NULL,
        status INTEGER NOT NULL,
        duration_ms ${t.real} NOT NULL,
        request_id TEXT NOT NULL,
        remote_addr TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX admin_audit_created_idx ON admin_audit (created_at, id);

      CREATE TABLE meta (
        key ${t.key} PRIMARY KEY,
        value TEXT NOT NULL
      );
    `;
}

/**
 * Version 2 (DESIGN.md §13): indexes that let admission and placement count live sandboxes
 * (state, then the expiry range) in total, per owner and per worker without reading rows, and a
 * partial index in list order over the listed states, so a page reads about a page of rows.
 */
export const LIVE_COUNT_INDEXES = `
  CREATE INDEX IF NOT EXISTS sandboxes_live_idx ON sandboxes (state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_owner_live_idx ON sandboxes (owner_id, state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_worker_live_idx ON sandboxes (worker_id, state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_listed_idx ON sandboxes (created_at, id) WHERE state IN ('running', 'unhealthy', 'error');
`;

/** Rows of `live_counts`: kind 0 = total, 1 = per owner, 2 = per worker, 3 = per worker and owner. */
const LIVE_STATES = "('running', 'unhealthy')";
/** Version 16 on (DESIGN.md §16): paused sandboxes hold their memory and count like running ones. */
export const LIVE_STATES_PAUSED = "('running', 'paused', 'unhealthy')";

/** Seeds `live_counts` from the rows already stored (both dialects). */
const seedLiveCounts = (LIVE_STATES: string) => {
  const insert = 'INSERT INTO live_counts (kind, worker_id, owner_id, n) SELECT';
  const live = `COUNT(*) FROM sandboxes WHERE state IN ${LIVE_STATES}`;
  return `
  ${insert} 0, '', '', ${live};
  ${insert} 1, '', owner_id, ${live} AND owner_id IS NOT NULL GROUP BY owner_id;
  ${insert} 2, worker_id, '', ${live} GROUP BY worker_id;
  ${insert} 3, worker_id, owner_id, ${live} AND owner_id IS NOT NULL GROUP BY worker_id, owner_id;
`;
};
const SEED_LIVE_COUNTS = seedLiveCounts(LIVE_STATES);

const LIVE_COUNTS_TABLE = (key: string) => `
  CREATE TABLE live_counts (
    kind INTEGER NOT NULL,
    worker_id ${key} NOT NULL,
    owner_id ${key} NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (kind, worker_id, owner_id)
  );
`;

/** The rows a change of one sandbox moves (d = 1 or -1), as an upsert of (kind, worker, owner). */
const bump = (w: string, o: string, d: number, when: string, excluded: string) => `
    INSERT INTO live_counts (kind, worker_id, owner_id, n)
      SELECT 0, '', '', ${d} WHERE ${when}
      UNION ALL SELECT 2, ${w}, '', ${d} WHERE ${when}
      UNION ALL SELECT 1, '', ${o}, ${d} WHERE ${when} AND ${o} IS NOT NULL
      UNION ALL SELECT 3, ${w}, ${o}, ${d} WHERE ${when} AND ${o} IS NOT NULL
      ON CONFLICT (kind, worker_id, owner_id) DO UPDATE SET n = ${excluded};`;

/** A change that moves a live count: the live side of the state, the worker or the owner changed. */
const moves = (LIVE_STATES: string) =>
  `(OLD.state IN ${LIVE_STATES}) <> (NEW.state IN ${LIVE_STATES}) OR OLD.worker_id <> NEW.worker_id OR ` +
  `OLD.owner_id IS DISTINCT FROM NEW.owner_id`;
const MOVES = moves(LIVE_STATES);

/** The rows a new row (`NEW`, +1) or a gone one (`OLD`, -1) moves while in a `live` state. */
const bumpNew = (live: string, excluded: string) => bump('NEW.worker_id', 'NEW.owner_id', 1, `NEW.state IN ${live}`, excluded);
const bumpOld = (live: string, excluded: string) => bump('OLD.worker_id', 'OLD.owner_id', -1, `OLD.state IN ${live}`, excluded);

/** The SQLite live-count triggers over `live` states (version 4: running, unhealthy; version 16: paused too). */
const sqliteTriggers = (live: string) => `
  CREATE TRIGGER sandboxes_live_insert AFTER INSERT ON sandboxes BEGIN${bumpNew(live, 'n + excluded.n')}
  END;
  CREATE TRIGGER sandboxes_live_update AFTER UPDATE OF state, worker_id, owner_id ON sandboxes
    WHEN ${moves(live).replace('IS DISTINCT FROM', 'IS NOT')} BEGIN${bumpOld(live, 'n + excluded.n')}${bumpNew(live, 'n + excluded.n')}
  END;
  CREATE TRIGGER sandboxes_live_delete AFTER DELETE ON sandboxes BEGIN${bumpOld(live, 'n + excluded.n')}
  END;`;

/**
 * Version 3/4 (DESIGN.md §13): live sandboxes counted as they change, in total, per owner, per
 * worker and per worker and owner, so admission and placement read a row instead of counting
 * index entries (100,000 live made each count cost milliseconds). "Live" also needs the expiry:
 * readers subtract the rows still in a live state but past their TTL (an index range that the
 * reaper keeps short), so the counts stay exact at any moment.
 */
export const SQLITE_LIVE_COUNTS = `${LIVE_COUNTS_TABLE('TEXT')}${sqliteTriggers(LIVE_STATES)}
${SEED_LIVE_COUNTS}`;

export const POSTGRES_LIVE_COUNTS = `${LIVE_COUNTS_TABLE('TEXT COLLATE "C"')}
  -- The function finds live_counts by the schema it was created in, whatever the writer's search_path.
  CREATE FUNCTION sbx_live_counts() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
  BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN${bumpOld(LIVE_STATES, 'live_counts.n + excluded.n')}
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN${bumpNew(LIVE_STATES, 'live_counts.n + excluded.n')}
    END IF;
    RETURN NULL;
  END $fn$;
  CREATE TRIGGER sandboxes_live_insert AFTER INSERT OR DELETE ON sandboxes FOR EACH ROW EXECUTE FUNCTION sbx_live_counts();
  CREATE TRIGGER sandboxes_live_update AFTER UPDATE OF state, worker_id, owner_id ON sandboxes FOR EACH ROW
    WHEN (${MOVES}) EXECUTE FUNCTION sbx_live_counts();
${SEED_LIVE_COUNTS}`;

/**
 * Version 5 (DESIGN.md §10): idempotency keys of spawns, per owner (`''` for none); `sandbox_id`
 * is null while the first request is still spawning.
 */
export const idempotencyKeys = (key: string) => `
  CREATE TABLE idempotency_keys (
    owner_key ${key} NOT NULL,
    key ${key} NOT NULL,
    request_hash TEXT NOT NULL,
    sandbox_id TEXT,
    created_at ${key} NOT NULL,
    PRIMARY KEY (owner_key, key)
  );
  CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
`;

/** Version 6 (DESIGN.md §10): the network of a sandbox and of a template (null: the default). */
export const NETWORK_COLUMNS = `
  ALTER TABLE sandboxes ADD COLUMN network TEXT;
  ALTER TABLE templates ADD COLUMN network TEXT;
`;

/**
 * Version 7 (DESIGN.md §10): snapshots and volumes, both kept until deleted; the volumes a sandbox
 * mounts (JSON `[{name, mount_path}]`, null for none) and a template's snapshot and volumes.
 */
export const snapshotsAndVolumes = (key: string) => `
  CREATE TABLE snapshots (
    name ${key} PRIMARY KEY,
    provider TEXT NOT NULL,
    image TEXT NOT NULL,
    kernel TEXT,
    size_bytes BIGINT NOT NULL,
    created_at ${key} NOT NULL,
    owner_id ${key},
    sandbox_id TEXT NOT NULL,
    worker_id TEXT NOT NULL
  );
  CREATE TABLE volumes (
    name ${key} PRIMARY KEY,
    provider TEXT NOT NULL,
    created_at ${key} NOT NULL,
    owner_id ${key}
  );
  ALTER TABLE sandboxes ADD COLUMN volumes TEXT;
  ALTER TABLE sandboxes ADD COLUMN snapshot TEXT;
  ALTER TABLE templates ADD COLUMN volumes TEXT;
  ALTER TABLE templates ADD COLUMN snapshot TEXT;
`;

/**
 * Version 8 (DESIGN.md §10): background processes of sandboxes. Version 7 is snapshots and volumes.
 * `args` is a JSON array; the holder is the replica that follows the process and keeps its output.
 */
export const processesTable = (key: string) => `
  CREATE TABLE processes (
    id ${key} PRIMARY KEY,
    sandbox_id ${key} NOT NULL,
    command TEXT NOT NULL,
    args TEXT NOT NULL,
    mode TEXT NOT NULL,
    state TEXT NOT NULL,
    exit_code INTEGER,
    started_at ${key} NOT NULL,
    ended_at TEXT,
    runner TEXT NOT NULL,
    holder ${key} NOT NULL,
    deadline_at TEXT
  );
  CREATE INDEX processes_sandbox_idx ON processes (sandbox_id, started_at, id);
  CREATE INDEX processes_state_idx ON processes (state, holder);
`;

/**
 * Version 9 (DESIGN.md §11): warm runtimes, ready to be claimed by a spawn of their shape; a
 * template's warm count.
 */
export const warmRuntimes = (key: string) => `
  CREATE TABLE warm_runtimes (
    sandbox_id ${key} PRIMARY KEY,
    shape ${key} NOT NULL,
    provider TEXT NOT NULL,
    runtime_id TEXT NOT NULL,
    network TEXT,
    worker_id ${key} NOT NULL,
    created_at ${key} NOT NULL
  );
  CREATE INDEX warm_runtimes_shape_idx ON warm_runtimes (worker_id, shape, created_at, sandbox_id);
  ALTER TABLE templates ADD COLUMN warm INTEGER;
`;

/** Version 10 (DESIGN.md §10): egress allow and deny lists of filtered sandboxes and templates (JSON, null for none). */
export const EGRESS_COLUMNS = `
  ALTER TABLE sandboxes ADD COLUMN egress TEXT;
  ALTER TABLE templates ADD COLUMN egress TEXT;
`;

/** Version 11 (DESIGN.md §10): the worker that holds a volume (null: the control plane's own node). Version 10 is egress rules. */
export const VOLUME_WORKER = `
  ALTER TABLE volumes ADD COLUMN worker_id TEXT;
`;

/**
 * Version 12 (DESIGN.md §8): per shared pool runtime, how many workspace uids it has given; a uid
 * is never given to a second tenant in a runtime's life. Version 11 is volume workers.
 */
export const POOL_UIDS = `
  CREATE TABLE pool_uids (
    runtime_id TEXT PRIMARY KEY,
    uids_given INTEGER NOT NULL
  );
`;

/** Version 13 (DESIGN.md §13): a provider's sandboxes counted by index (`GET /providers/{name}`'s `sandbox_count`). */
export const PROVIDER_COUNT_INDEX = `
  CREATE INDEX IF NOT EXISTS sandboxes_provider_live_idx ON sandboxes (provider, state, expires_at);
`;

/**
 * Version 14 (DESIGN.md §14): the environment every command of a sandbox gets (JSON, null for none)
 * and the seed its envd access token is derived from (null: no token).
 */
export const SANDBOX_ENV = `
  ALTER TABLE sandboxes ADD COLUMN env TEXT;
  ALTER TABLE sandboxes ADD COLUMN access_token_seed TEXT;
`;

/**
 * Version 15 (DESIGN.md §12): a provider's name is its config group's (`custom_http`); rows stored
 * under the other spelling (`custom-http`) — sandboxes, templates, snapshots, volumes, warm
 * runtimes and their shapes, and the providers workers advertised — take the canonical one.
 */
const renameIn = (column: string) => `REPLACE(${column}, '"custom-http"', '"custom_http"')`;
export const PROVIDER_NAMES = `
  UPDATE sandboxes SET provider = 'custom_http' WHERE provider = 'custom-http';
  UPDATE templates SET provider = 'custom_http' WHERE provider = 'custom-http';
  UPDATE snapshots SET provider = 'custom_http' WHERE provider = 'custom-http';
  UPDATE volumes SET provider = 'custom_http' WHERE provider = 'custom-http';
  UPDATE warm_runtimes SET provider = 'custom_http', shape = ${renameIn('shape')} WHERE provider = 'custom-http';
  UPDATE workers SET providers = ${renameIn('providers')} WHERE providers LIKE '%"custom-http"%';
`;

/**
 * Version 16 (DESIGN.md §16): forks — the sandbox a fork was made from (`forked_from`) and the fork
 * image it started from (`fork`), by which the image is reference-counted and removed with its last fork.
 */
export const FORK_COLUMNS = `
  ALTER TABLE sandboxes ADD COLUMN forked_from TEXT;
  ALTER TABLE sandboxes ADD COLUMN fork TEXT;
  CREATE INDEX IF NOT EXISTS sandboxes_fork_idx ON sandboxes (fork) WHERE fork IS NOT NULL;
`;
/** Columns of version 16 (DESIGN.md §16): a sandbox's auto-pause, what its TTL does, and a template's. */
const PAUSE_COLUMNS = `
  ALTER TABLE sandboxes ADD COLUMN auto_pause_ms BIGINT;
  ALTER TABLE sandboxes ADD COLUMN on_expire TEXT;
  ALTER TABLE sandboxes ADD COLUMN pause_at TEXT;
  ALTER TABLE sandboxes ADD COLUMN ttl_ms BIGINT;
  ALTER TABLE templates ADD COLUMN auto_pause TEXT;
  ALTER TABLE templates ADD COLUMN on_expire TEXT;
  DROP INDEX IF EXISTS sandboxes_listed_idx;
  CREATE INDEX sandboxes_listed_idx ON sandboxes (created_at, id) WHERE state IN ('running', 'paused', 'unhealthy', 'error');
  CREATE INDEX sandboxes_pause_at_idx ON sandboxes (pause_at) WHERE pause_at IS NOT NULL;
  DELETE FROM live_counts;
${seedLiveCounts(LIVE_STATES_PAUSED)}`;

/**
 * Version 16 (DESIGN.md §16): the state `paused` joins the live states (counted by admission and
 * placement, listed), the pause columns, and an index for the sandboxes whose TTL pauses them.
 */
export const SQLITE_PAUSE = `
  DROP TRIGGER IF EXISTS sandboxes_live_insert;
  DROP TRIGGER IF EXISTS sandboxes_live_update;
  DROP TRIGGER IF EXISTS sandboxes_live_delete;
${sqliteTriggers(LIVE_STATES_PAUSED)}
${PAUSE_COLUMNS}`;

export const POSTGRES_PAUSE = `
  CREATE OR REPLACE FUNCTION sbx_live_counts() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
  BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN${bumpOld(LIVE_STATES_PAUSED, 'live_counts.n + excluded.n')}
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN${bumpNew(LIVE_STATES_PAUSED, 'live_counts.n + excluded.n')}
    END IF;
    RETURN NULL;
  END $fn$;
  DROP TRIGGER IF EXISTS sandboxes_live_update ON sandboxes;
  CREATE TRIGGER sandboxes_live_update AFTER UPDATE OF state, worker_id, owner_id ON sandboxes FOR EACH ROW
    WHEN (${moves(LIVE_STATES_PAUSED)}) EXECUTE FUNCTION sbx_live_counts();
${PAUSE_COLUMNS}`;
