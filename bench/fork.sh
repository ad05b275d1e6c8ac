#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Group fork on `local` (bench/fork.c): fork(N) of a sandbox with SIZE MiB
# written vs 2 cold creates, interleaved in one run with the ratio, then
# fork(N) and a snapshot against what the parent wrote (0, 100, 400 MiB; 1000
# and --files small files).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/fork.sh BUILD_DIR [--rounds R] [--n N] [--mb SIZE] [--files F] [--debug]" >&2; exit 2; }
B=$(cd "$1" && pwd) || exit 2
shift
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups)" >&2; exit 1; }
DRIVER=$B/bench/sbx-bench-fork
[ -x "$DRIVER" ] && [ -x "$B/src/cli/sbx" ] || { echo "bench: build $B first" >&2; exit 1; }
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/sbx-bench-fork.XXXXXX) || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (unmounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G
cleanup() {
  set +e
  "$B/src/cli/sbx" gc --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
R=$WORK/rootfs
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$R" "$BB" || exit 1
"$B/src/cli/sbx" image import bench-busybox "$R" >/dev/null || exit 1
echo "host: $(uname -srm), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$DRIVER" --image bench-busybox "$@"
