#!/usr/bin/env bash
# Registers Debian's gVisor `runsc` with the running Docker engine as the runtime `runsc`, for the
# docker contract suite under gVisor (SBX_TEST_RUNSC=1). Its networking is off (`--network=none`):
# under this kernel gVisor's netstack cannot be used. Idempotent; assumes dockerd is up
# (scripts/test-docker-up.sh) and `runsc` installed (apt-get install runsc).
set -euo pipefail

CONFIG="${SBX_DOCKERD_CONFIG:-/etc/docker/daemon.json}"
RUNSC="$(command -v runsc || true)"
die() {
  echo "test-runsc-up: $*" >&2
  exit 1
}
[[ -n "$RUNSC" ]] || die "runsc is missing (apt-get install runsc)"

registered() {
  timeout 5 docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}

if ! registered; then
  mkdir -p "$(dirname "$CONFIG")"
  # Merged into what is there; `runtimes` is one of the options dockerd reloads on SIGHUP.
  node -e '
    const fs = require("fs");
    const [file, path] = process.argv.slice(1);
    let cfg = {};
    try { cfg = JSON.parse(fs.readFileSync(file, "utf8")); } catch {}
    cfg.runtimes = { ...(cfg.runtimes || {}), runsc: { path, runtimeArgs: ["--network=none"] } };
    fs.writeFileSync(file, JSON.stringify(cfg, null, 2) + "\n");
  ' "$CONFIG" "$RUNSC"
  # From /proc: pidof is not on every minimal system.
  pid="$(for p in /proc/[0-9]*; do [[ "$(cat "$p/comm" 2>/dev/null)" == dockerd ]] && echo "${p#/proc/}"; done || true)"
  [[ -n "$pid" ]] || die "dockerd is not running (scripts/test-docker-up.sh)"
  kill -HUP $pid
  for _ in $(seq 1 40); do
    registered && break
    sleep 0.25
  done
  registered || die "dockerd did not pick up the runsc runtime from $CONFIG"
fi
echo "test-runsc-up: runtime runsc ($RUNSC) registered" >&2
