#!/bin/sh
# Builds a minimal busybox root filesystem in DIR, offline, from the host's static busybox
# (Debian: apt-get install busybox-static). Used by the proot provider and, tarred and
# `docker import`-ed, as the Docker test image. Safe to run again on the same DIR.
set -eu

usage() { echo "usage: $0 DIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
DIR=$1
[ -n "$DIR" ] || usage

BUSYBOX=${BUSYBOX:-$(command -v busybox || true)}
if [ -z "$BUSYBOX" ] || [ ! -x "$BUSYBOX" ]; then
  echo "make-rootfs: busybox not found; install busybox-static" >&2
  exit 1
fi
# A dynamically linked busybox would need the host's libc inside the rootfs.
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  echo "make-rootfs: $BUSYBOX is dynamically linked; install busybox-static" >&2
  exit 1
fi

mkdir -p "$DIR"
cd "$DIR"
mkdir -p bin sbin usr/bin usr/sbin etc root workspace tmp proc dev sys
chmod 1777 tmp
chmod 0700 root

# Replace, never write through: a previous run left bin/busybox in place.
cp "$BUSYBOX" bin/busybox.new
chmod 0755 bin/busybox.new
mv -f bin/busybox.new bin/busybox

for applet in $(bin/busybox --list); do
  [ "$applet" = busybox ] && continue
  ln -sfn busybox "bin/$applet"
done
# Scripts commonly start with #!/usr/bin/env.
ln -sfn ../../bin/busybox usr/bin/env

cat > etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat > etc/group <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP
echo '127.0.0.1 localhost' > etc/hosts
