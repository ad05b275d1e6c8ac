# SPDX-License-Identifier: MIT
# Sourced by the bench scripts: the one busybox rootfs they all sandbox.
# bench_rootfs DIR BUSYBOX: busybox-static plus a link for every applet, a
# root user and group, a sticky /tmp.
bench_rootfs() {
  local r=$1 bb=$2 p
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,proc,dev,sys,tmp,root} || return 1
  cp "$bb" "$r/bin/busybox" || return 1
  for p in $("$bb" --list-full); do [ -e "$r/$p" ] || ln -s /bin/busybox "$r/$p"; done
  echo 'root:x:0:0:root:/root:/bin/sh' > "$r/etc/passwd"
  echo 'root:x:0:' > "$r/etc/group"
  chmod 1777 "$r/tmp"
}
