#!/usr/bin/env bash
# Makes a Docker engine and the offline test image available for the docker test suites.
# Assumes Debian `docker.io` and `busybox-static` are installed (CI does the apt step).
# Idempotent: CI and developers run the same script; a running engine and an existing image are reused.
#
#   scripts/test-docker-up.sh            # engine up + sbx-test/busybox:latest present
#   SBX_TEST_IMAGE=name:tag scripts/...  # another image name
#   scripts/test-docker-up.sh --rebuild  # rebuild the image even when it exists
set -euo pipefail

REBUILD=0
for arg in "$@"; do
  case "$arg" in
    --rebuild) REBUILD=1 ;;
    *) echo "usage: $0 [--rebuild]" >&2; exit 2 ;;
  esac
done

IMAGE="${SBX_TEST_IMAGE:-sbx-test/busybox:latest}"
LOG="${SBX_DOCKERD_LOG:-/tmp/sbx-dockerd.log}"
WAIT_SECONDS="${SBX_DOCKERD_WAIT:-60}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
  echo "test-docker-up: $*" >&2
  exit 1
}

# `docker version` talks to the engine; bounded so a wedged socket cannot hang CI.
engine_answers() {
  timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

command -v docker >/dev/null 2>&1 || die "the docker CLI is missing (apt-get install docker.io)"

if ! engine_answers; then
  command -v dockerd >/dev/null 2>&1 || die "no engine answers and dockerd is missing (apt-get install docker.io)"
  echo "test-docker-up: starting dockerd (log: $LOG)" >&2
  # setsid detaches the daemon from this script's process group so it outlives the caller.
  setsid dockerd >"$LOG" 2>&1 </dev/null &
  DOCKERD_PID=$!
  deadline=$((SECONDS + WAIT_SECONDS))
  show_log() {
    echo "---- last lines of $LOG ----" >&2
    tail -n 40 "$LOG" >&2 || true
  }
  until engine_answers; do
    if ! kill -0 "$DOCKERD_PID" 2>/dev/null; then
      show_log
      die "dockerd exited during startup"
    fi
    if ((SECONDS >= deadline)); then
      show_log
      die "dockerd did not answer within ${WAIT_SECONDS}s"
    fi
    sleep 0.5
  done
fi
echo "test-docker-up: engine $(docker version --format '{{.Server.Version}}') answers" >&2

if [[ "$REBUILD" == 0 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "test-docker-up: image $IMAGE present" >&2
  exit 0
fi

OLD_ID="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
ROOTFS="$(mktemp -d /tmp/sbx-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
# mktemp makes the directory 0700; it becomes the image's `/`, which every user must traverse.
chmod 0755 "$ROOTFS"

if [[ -f "$HERE/make-rootfs.sh" ]]; then
  bash "$HERE/make-rootfs.sh" "$ROOTFS"
else
  # Same layout as scripts/make-rootfs.sh: busybox plus one symlink per applet.
  BUSYBOX="$(command -v busybox || true)"
  [[ -n "$BUSYBOX" ]] || die "busybox is missing (apt-get install busybox-static)"
  mkdir -p "$ROOTFS"/{bin,sbin,usr/bin,usr/sbin,tmp,workspace,etc,root,proc,sys,dev,var/tmp}
  chmod 1777 "$ROOTFS/tmp" "$ROOTFS/var/tmp"
  cp "$BUSYBOX" "$ROOTFS/bin/busybox"
  for applet in $("$ROOTFS/bin/busybox" --list); do
    [[ -e "$ROOTFS/bin/$applet" ]] || ln -s busybox "$ROOTFS/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$ROOTFS/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$ROOTFS/etc/group"
fi

[[ -x "$ROOTFS/bin/sh" || -L "$ROOTFS/bin/sh" ]] || die "rootfs in $ROOTFS has no /bin/sh"
tar -C "$ROOTFS" -c . | docker import --change 'CMD ["/bin/sh"]' --change 'WORKDIR /workspace' - "$IMAGE" >/dev/null
# A rebuild leaves the previous image untagged; drop it unless a container still uses it.
if [[ -n "$OLD_ID" && "$OLD_ID" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
  docker rmi "$OLD_ID" >/dev/null 2>&1 || true
fi
echo "test-docker-up: built $IMAGE" >&2
