#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sbx's own overhead per agent turn on `local`, the model's time excluded
# (bench/turn.c): sbx_episode_turn(true) vs a bare sbx_sandbox_exec of the
# same command on a live sandbox vs bubblewrap running `true` (its only way:
# a sandbox per command) vs a host posix_spawn, interleaved in one run, with
# the ratios. Goal: <= 2 ms per turn. Results (summary.md, raw samples in ms)
# go to BUILD/bench-results/turn-<timestamp>/.
set -uo pipefail

usage() {
  echo "usage: bench/turn.sh BUILD_DIR [--n N] [--rounds R] [--warmup W] [--out DIR]" >&2
  echo "  --n N        samples per case and round (default 200)" >&2
  echo "  --rounds R   interleaved rounds (default 5)" >&2
}

[ $# -ge 1 ] || { usage; exit 2; }
B=$(cd "$1" && pwd) || exit 2
shift
N=200 ROUNDS=5 WARMUP=20 OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --n) N=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) usage; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups)" >&2; exit 1; }
DRIVER=$B/bench/sbx-bench-turn
[ -x "$DRIVER" ] && [ -x "$B/src/cli/sbx" ] || { echo "bench: build $B first" >&2; exit 1; }
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi
BWRAP=$(command -v bwrap || true)
[ -n "$BWRAP" ] || echo "bench: bubblewrap is not installed (scripts/deps.sh --bench): no peer row" >&2

OUT=${OUT:-$B/bench-results/turn-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-turn.XXXXXX) || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (unmounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=4G

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

{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -srm)"
  echo "cpus	$(nproc)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "bwrap	${BWRAP:+$("$BWRAP" --version 2>/dev/null)}"
  echo "git	$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null)"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/host.tsv"
cat "$OUT/host.tsv"
echo "turn bench: $ROUNDS rounds x $N samples per case (interleaved), warmup $WARMUP"
"$DRIVER" --image bench-busybox --rootfs "$R" ${BWRAP:+--bwrap "$BWRAP"} --n "$N" \
  --rounds "$ROUNDS" --warmup "$WARMUP" --out "$OUT" || exit 1
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/host.tsv"
echo "results: $OUT"
