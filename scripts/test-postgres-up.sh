#!/usr/bin/env bash
# Starts the local Debian PostgreSQL cluster for the store contract tests and prints the DSN.
# Idempotent: safe to run when the cluster is already up and the role/database exist.
# stdout carries only the DSN; progress goes to stderr. Assumes `postgresql` is installed.
set -euo pipefail

ROLE=sbx
PASSWORD=sbx
DATABASE=sbx_test
WAIT_SECONDS=${SBX_PG_WAIT_SECONDS:-30}

log() { printf 'test-postgres-up: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v pg_lsclusters >/dev/null 2>&1 || die "pg_lsclusters not found (is the Debian postgresql package installed?)"

# Runs a command as the postgres superuser, from a directory it can read.
as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    (cd /tmp && "$@")
  elif command -v runuser >/dev/null 2>&1; then
    (cd /tmp && runuser -u postgres -- "$@")
  else
    (cd /tmp && su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
  fi
}

psql_admin() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PORT" "$@"; }

# Prefer the `main` cluster of the newest version; create one if none exists.
cluster_line=$(pg_lsclusters -h 2>/dev/null | awk '$2 == "main"' | sort -k1,1V | tail -n 1 || true)
if [ -z "$cluster_line" ]; then
  version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$version" ] || die "no PostgreSQL server version found under /usr/lib/postgresql"
  log "creating cluster $version/main"
  pg_createcluster "$version" main >&2
  cluster_line=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"')
fi

VERSION=$(awk '{print $1}' <<<"$cluster_line")
PORT=$(awk '{print $3}' <<<"$cluster_line")
STATUS=$(awk '{print $4}' <<<"$cluster_line")

if [ "$STATUS" != online ]; then
  log "starting cluster $VERSION/main on port $PORT"
  pg_ctlcluster "$VERSION" main start >&2 || log "pg_ctlcluster start returned non-zero; waiting anyway"
else
  log "cluster $VERSION/main already online on port $PORT"
fi

deadline=$((SECONDS + WAIT_SECONDS))
until pg_isready -q -h 127.0.0.1 -p "$PORT"; do
  [ "$SECONDS" -lt "$deadline" ] || die "PostgreSQL did not answer on 127.0.0.1:$PORT within ${WAIT_SECONDS}s"
  sleep 0.5
done
log "PostgreSQL answers on 127.0.0.1:$PORT"

if [ "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" = 1 ]; then
  psql_admin -c "ALTER ROLE $ROLE WITH LOGIN PASSWORD '$PASSWORD'"
else
  log "creating role $ROLE"
  psql_admin -c "CREATE ROLE $ROLE WITH LOGIN PASSWORD '$PASSWORD'"
fi

if [ "$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != 1 ]; then
  log "creating database $DATABASE"
  psql_admin -c "CREATE DATABASE $DATABASE OWNER $ROLE"
fi

printf 'postgres://%s:%s@127.0.0.1:%s/%s\n' "$ROLE" "$PASSWORD" "$PORT" "$DATABASE"
