#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Warm pools: create latency from a pool vs a cold create, side by side in one
# run and one runtime, and the memory an idle pooled sandbox costs. Uses a
# private image store and state dir (removed on exit).
#   bench/pool.sh BUILD_DIR [--n 50] [--rounds 4] [--size 4] [--idle 50]
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/pool.sh BUILD_DIR [sbx-bench-pool options]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
shift
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root" >&2; exit 1; }
SBX=$BUILD/src/cli/sbx BP=$BUILD/bench/sbx-bench-pool
for f in "$SBX" "$BP"; do [ -x "$f" ] || { echo "bench: $f missing; build first" >&2; exit 1; }; done
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2; exit 1
fi
WORK=$(mktemp -d /tmp/sbx-bench-pool.XXXXXX) || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=4G
mkdir -p "$SBX_IMAGE_DIR" "$SBX_STATE_DIR" "$WORK/bin"
cp "$SBX" "$BP" "$WORK/bin/" && SBX=$WORK/bin/sbx BP=$WORK/bin/sbx-bench-pool
cleanup() {
  set +e
  "$SBX" gc --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$WORK/rootfs" "$BB" >/dev/null || exit 1
"$SBX" image import bench-busybox "$WORK/rootfs" >/dev/null || exit 1
echo "host: $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
"$BP" --image bench-busybox "$@"
