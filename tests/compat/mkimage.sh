#!/usr/bin/env bash
# Builds the image "bash" the compatibility suite creates sandboxes from:
# the host's /bin/bash with the libraries it links, busybox-static for the
# usual tools, root and user (1000, /home/user) accounts. No download. The
# rootfs comes from tests/support/mk-bash-rootfs.sh (shared with the server's
# integration tests) when it exists, else from the same recipe below.
#   SBX_IMAGE_DIR=DIR tests/compat/mkimage.sh SBX [NAME]
# Skips the import when NAME already exists in the store.
set -euo pipefail
sbx=${1:?usage: mkimage.sh SBX [NAME]}
name=${2:-bash}

if "$sbx" image inspect "$name" >/dev/null 2>&1; then
  exit 0
fi
[ -x /bin/busybox ] || { echo "mkimage: /bin/busybox missing (busybox-static)" >&2; exit 1; }
[ -x /bin/bash ] || { echo "mkimage: /bin/bash missing" >&2; exit 1; }

root=$(mktemp -d /tmp/sbx-compat-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
helper=$(cd "$(dirname "${BASH_SOURCE[0]}")/../support" 2>/dev/null && pwd)/mk-bash-rootfs.sh
if [ -f "$helper" ]; then
  sh "$helper" "$root"
  "$sbx" image import "$name" "$root" >/dev/null
  exit 0
fi
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home/user,tmp,dev,proc,sys,run,var/tmp}
chmod 1777 "$root/tmp" "$root/var/tmp"
cp /bin/busybox "$root/bin/busybox"
cp /bin/bash "$root/bin/bash"
# Shared libraries of bash, at the paths the loader expects.
ldd /bin/bash | grep -o '/[^ ]*' | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
/bin/busybox --list-full | while read -r applet; do
  [ -n "$applet" ] && [ ! -e "$root/$applet" ] && [ ! -L "$root/$applet" ] && ln -s /bin/busybox "$root/$applet"
done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF
chown 1000:1000 "$root/home/user"
"$sbx" image import "$name" "$root" >/dev/null
