#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the security hardening costs, before and after side by side in one run:
#   latency   create -> exec `true` -> destroy, rounds interleaved between the
#             BEFORE build, the AFTER build, AFTER with --userns host, and
#             AFTER with the writable layer in memory (SBX_SCRATCH=tmpfs)
#   density   idle sandboxes at each count, host memory per sandbox, both builds
# BEFORE and AFTER are build dirs of two checkouts (e.g. a `git worktree` of
# the commit before the hardening). One private image store and state dir per
# build, removed on exit. Prints medians and after/before ratios.
set -uo pipefail

usage() {
  echo "usage: bench/hardening.sh BEFORE_BUILD AFTER_BUILD [--n N] [--rounds R] [--counts LIST]"
}
[ $# -ge 2 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
BEFORE=$(cd "$1" && pwd) || exit 2
AFTER=$(cd "$2" && pwd) || exit 2
shift 2
N=600 ROUNDS=6 COUNTS=500,1000
while [ $# -gt 0 ]; do
  case "$1" in
    --n) N=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --counts) COUNTS=$2; shift ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root" >&2; exit 1; }
BB=$(command -v busybox) || { echo "bench: busybox-static is needed" >&2; exit 1; }

WORK=$(mktemp -d /tmp/sbx-harden.XXXXXX) || exit 1
cleanup() {
  for b in before after; do
    SBX_STATE_DIR=$WORK/$b/state SBX_IMAGE_DIR=$WORK/$b/images SBX_SCRATCH_DIR=$WORK/$b/scratch \
      "$WORK/$b/sbx" gc --all >/dev/null 2>&1
    umount -l "$WORK/$b/scratch" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ROOTFS=$WORK/rootfs
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$ROOTFS" "$BB" || exit 1

for b in before after; do
  src=$BEFORE; [ $b = after ] && src=$AFTER
  mkdir -p "$WORK/$b/state" "$WORK/$b/images"
  # private copies: a concurrent ninja must not relink them mid-run
  cp "$src/src/cli/sbx" "$src/bench/sbx-bench-lifecycle" "$WORK/$b/" || exit 1
  SBX_STATE_DIR=$WORK/$b/state SBX_IMAGE_DIR=$WORK/$b/images "$WORK/$b/sbx" image import bb "$ROOTFS" >/dev/null ||
    { echo "bench: $b: image import failed" >&2; exit 1; }
done

run_lc() { # build label [extra args...]
  local b=$1 label=$2; shift 2
  SBX_STATE_DIR=$WORK/$b/state SBX_IMAGE_DIR=$WORK/$b/images SBX_SCRATCH_DIR=$WORK/$b/scratch SBX_SCRATCH_SIZE=8G \
    "$WORK/$b/sbx-bench-lifecycle" --image bb --label "$label" "$@"
}

per=$(( (N + ROUNDS - 1) / ROUNDS ))
echo "== latency: $N lifecycles per variant in $ROUNDS interleaved rounds of $per"
for r in $(seq 1 "$ROUNDS"); do
  run_lc before before --mode latency --n "$per" --warmup 3 --json \
    --samples "$WORK/before.samples" >> "$WORK/before.jsonl" 2>/dev/null || { echo "bench: before failed" >&2; exit 1; }
  run_lc after after --mode latency --n "$per" --warmup 3 --json \
    --samples "$WORK/after.samples" >> "$WORK/after.jsonl" 2>/dev/null || { echo "bench: after failed" >&2; exit 1; }
  run_lc after after-userns-host --mode latency --userns host --n "$per" --warmup 3 --json \
    --samples "$WORK/host.samples" >> "$WORK/host.jsonl" 2>/dev/null || { echo "bench: after --userns host failed" >&2; exit 1; }
  SBX_SCRATCH=tmpfs run_lc after after-scratch-tmpfs --mode latency --n "$per" --warmup 3 --json \
    --samples "$WORK/tmpfs.samples" >> "$WORK/tmpfs.jsonl" 2>/dev/null || { echo "bench: after SBX_SCRATCH=tmpfs failed" >&2; exit 1; }
done

echo "== density at $COUNTS"
for b in before after; do
  run_lc "$b" "$b" --mode density --counts "$COUNTS" --json > "$WORK/$b.density.json" 2>/dev/null ||
    echo "bench: $b density failed" >&2
done

python3 - "$WORK" <<'PY'
import json, statistics, sys
w = sys.argv[1]
def samples(name):
    try:
        return [float(x) for x in open(f"{w}/{name}.samples") if x.strip()]
    except OSError:
        return []
def phase(name, key):
    vals = []
    for line in open(f"{w}/{name}.jsonl"):
        j = json.loads(line)
        vals.append(j[key]["median_ms"] if key else j["median_ms"])
    return statistics.median(vals)
rows = [("before", "before (pre-hardening)"), ("after", "after (hardening on)"), ("host", "after, --userns host"),
        ("tmpfs", "after, writable layer in memory (SBX_SCRATCH=tmpfs)")]
print("\n| variant | lifecycle median ms | create | exec | destroy |")
print("|---|---:|---:|---:|---:|")
med = {}
for k, label in rows:
    s = samples(k)
    med[k] = statistics.median(s) if s else float("nan")
    print(f"| {label} | {med[k]:.2f} | {phase(k, 'create'):.2f} | {phase(k, 'exec'):.2f} | {phase(k, 'destroy'):.2f} |")
print(f"\nafter/before lifecycle median: {med['after'] / med['before']:.3f}x;"
      f" user namespaces alone (after / after --userns host): {med['after'] / med['host']:.3f}x;"
      f" disk layer alone (after / after tmpfs): {med['after'] / med['tmpfs']:.3f}x")
for b in ("before", "after"):
    try:
        d = json.load(open(f"{w}/{b}.density.json"))
    except (OSError, ValueError):
        print(f"{b}: density not measured")
        continue
    pts = ", ".join(f"{p['count']}: {p['mib_per']:.3f} MiB" for p in d.get("points", []))
    print(f"density {b}: {pts}")
PY
