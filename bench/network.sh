#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What network=internet costs against the default network (none): create,
# exec `true` and destroy, N lifecycles per mode in R interleaved rounds
# (bench/network.c). Private image store and state dir under a temp dir,
# removed on exit with any sandbox left behind; the nftables table inet sbx
# is the host's and stays (it is shared by every sbx on the host).
#
#   bench/network.sh BUILD_DIR [--n 50] [--rounds 4]
# SBX_LOG=debug shows the library's split of each internet create.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bench/network.sh BUILD_DIR [--n N] [--rounds R]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
shift
BIN=$BUILD/bench/sbx-bench-network SBX=$BUILD/src/cli/sbx
[ -x "$BIN" ] || { echo "bench: build $BIN first (ninja -C $BUILD)" >&2; exit 1; }
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/sbx-bench-net.XXXXXX) || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (umounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G
cleanup() {
  set +e
  [ -x "$SBX" ] && "$SBX" gc --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
R=$WORK/rootfs
mkdir -p "$SBX_IMAGE_DIR" "$SBX_STATE_DIR"
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$R" "$BB" || exit 1
"$SBX" image import busybox "$R" >/dev/null || exit 1
echo "kernel $(uname -r), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), git $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
"$BIN" --image busybox "$@"
