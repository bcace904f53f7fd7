#!/bin/sh
# Builds a Firecracker root drive: an ext4 image (providers.firecracker.rootfs_path) holding the
# busybox root filesystem of make-rootfs.sh, the guest agent at /sbin/sbx-agent, and busybox init
# with an inittab that mounts the kernel filesystems and keeps the agent serving vsock port 1024
# (docs/providers/firecracker.md). Offline and without mounting anything: `mkfs.ext4 -d` copies a
# directory into the new filesystem (e2fsprogs >= 1.43). Run it as root so the image's files are
# owned by root (mkfs.ext4 -d keeps the owners they have here).
#
#   scripts/make-firecracker-rootfs.sh OUT.ext4 [SIZE_MIB]
#
# BUSYBOX: a static busybox (default: the one on PATH; Debian: busybox-static).
# SBX_AGENT: the static sbx-agent (default: dist/agent/sbx-agent-linux-<arch> from `npm run build`).
set -eu

usage() { echo "usage: $0 OUT.ext4 [SIZE_MIB]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
OUT=$1
SIZE=${2:-}
[ -n "$OUT" ] || usage
case "$SIZE" in ''|*[!0-9]*) [ -z "$SIZE" ] || usage ;; esac

HERE=$(cd "$(dirname "$0")" && pwd)
case "$(uname -m)" in x86_64) ARCH=x64 ;; aarch64) ARCH=arm64 ;; *) ARCH=$(uname -m) ;; esac
AGENT=${SBX_AGENT:-$HERE/../dist/agent/sbx-agent-linux-$ARCH}
MKFS=$(command -v mkfs.ext4 || command -v /sbin/mkfs.ext4 || command -v /usr/sbin/mkfs.ext4 || true)

if [ ! -x "$AGENT" ]; then
  echo "make-firecracker-rootfs: no agent at $AGENT; run npm run build (needs gcc with a static libc) or set SBX_AGENT" >&2
  exit 1
fi
# The guest has no libc of the host's: the agent must be static, like busybox.
if ldd "$AGENT" >/dev/null 2>&1; then
  echo "make-firecracker-rootfs: $AGENT is dynamically linked; build it static (npm run build does)" >&2
  exit 1
fi
if [ -z "$MKFS" ]; then
  echo "make-firecracker-rootfs: mkfs.ext4 not found; install e2fsprogs" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sbx-fcroot.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
ROOT=$WORK/root
sh "$HERE/make-rootfs.sh" "$ROOT"

cp "$AGENT" "$ROOT/sbin/sbx-agent"
chmod 0755 "$ROOT/sbin/sbx-agent"
ln -sfn ../bin/busybox "$ROOT/sbin/init"
mkdir -p "$ROOT/etc/init.d" "$ROOT/run" "$ROOT/var/log"

# busybox init: rcS once, the agent respawned whenever it exits; Firecracker's SendCtrlAltDel
# (the provider's destroy) reaches init as ctrlaltdel: a clean reboot, which ends the VMM (reboot=k).
cat > "$ROOT/etc/inittab" <<'INITTAB'
::sysinit:/etc/init.d/rcS
::respawn:/sbin/sbx-agent --vsock-guest --port 1024
::ctrlaltdel:/bin/reboot
::shutdown:/bin/umount -a -r
INITTAB

cat > "$ROOT/etc/init.d/rcS" <<'RCS'
#!/bin/sh
# The kernel boots with the root drive read-only unless its command line says rw.
mount -o remount,rw / 2>/dev/null
mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /run
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname sbx
# eth0 (only with a TAP configured on the host): give its address with the kernel's ip= argument.
exit 0
RCS
chmod 0755 "$ROOT/etc/init.d/rcS"
echo sbx > "$ROOT/etc/hostname"

if [ -z "$SIZE" ]; then
  used=$(du -sm "$ROOT" | cut -f1)
  SIZE=$((used + 64))
fi
rm -f "$OUT.tmp"
"$MKFS" -q -F -L sbx-rootfs -d "$ROOT" "$OUT.tmp" "${SIZE}M" >/dev/null
mv -f "$OUT.tmp" "$OUT"
echo "make-firecracker-rootfs: built $OUT (${SIZE} MiB)"
