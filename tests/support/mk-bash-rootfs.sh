#!/bin/sh
# Builds a small rootfs for E2B-style tests in DIR, offline: the host's
# /bin/bash with the shared libraries `ldd` lists (and the dynamic loader),
# busybox-static for every other command, /etc/passwd with root and `user`
# (uid 1000, home /home/user), and /etc/group. Import it with
#   sbx image import bash DIR
# The E2B SDK runs `/bin/bash -l -c CMD`, so its sandboxes need bash.
set -eu
dir=${1:?usage: mk-bash-rootfs.sh DIR}
[ -x /bin/busybox ] || { echo "mk-bash-rootfs: /bin/busybox (busybox-static) is missing" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
mkdir -p bin sbin usr/bin usr/sbin etc tmp root home/user proc dev sys var/tmp run lib lib64
chmod 1777 tmp var/tmp
chown 1000:1000 home/user
cp /bin/busybox bin/busybox
for app in $(/bin/busybox --list-full); do
  [ -e "$app" ] || [ -L "$app" ] || ln -s /bin/busybox "$app"
done
rm -f bin/bash
cp /bin/bash bin/bash
ldd /bin/bash | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | while read -r lib; do
  mkdir -p ".$(dirname "$lib")"
  cp -L "$lib" ".$lib"
done
cat > etc/passwd <<'P'
root:x:0:0:root:/root:/bin/bash
user:x:1000:1000:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
P
cat > etc/group <<'G'
root:x:0:
user:x:1000:
nogroup:x:65534:
G
echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' > etc/profile
