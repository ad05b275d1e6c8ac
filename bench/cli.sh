#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CLI start-up cost: two sbx CLIs (this build and BEFORE, e.g. a build of an
# older commit) side by side with bubblewrap's whole process, in interleaved
# rounds, each run a posix_spawn + waitpid timed by sbx-bench-spawntime:
#   version   sbx --version
#   exec      sbx exec ID -- true          (one sandbox per CLI, made first)
#   run       sbx run IMAGE -- true        (create, exec, destroy)
#   run-pool  sbx run --env SBX_BENCH_POOL=1 IMAGE -- true, that spec kept warm
#             by `sbx pool start -n R+8` (R = runs per round; this build only):
#             each run takes one, and hands its teardown to the keeper
#   bwrap     bwrap --unshare-all --die-with-parent --ro-bind ROOTFS / true
#   host-true /bin/true (the floor: what any process start costs here)
#   cmd-true  busybox true, the sandbox's command started on the host with
#             no sandbox: what its own start costs (glibc's, static)
# Any `sbx exec ID -- true` starts two processes, the CLI and the command, so
# host-true + cmd-true is its floor; the summary prints it against bwrap,
# with the cost of one CPUID (sbx-bench-cpuid, x86_64), which a glibc start
# issues ~100 of and which traps to the hypervisor in a virtual machine.
# Prints medians, p90 and the ratios against bwrap and after/before.
# BEFORE is a build dir (BEFORE/src/cli/sbx) or an sbx binary, e.g.
#   git worktree add --detach /tmp/sbx-before <commit> &&
#   meson setup /tmp/sbx-before/build && ninja -C /tmp/sbx-before/build src/cli/sbx
# Results (raw samples in ms, summary.md) go to BUILD/bench-results/cli-<timestamp>/.
set -uo pipefail

usage() {
  echo "usage: bench/cli.sh BUILD_DIR BEFORE_BUILD_DIR|BEFORE_SBX [--n N] [--rounds R] [--out DIR]" >&2
  echo "  --n N        runs per case and CLI in all (default 200)" >&2
  echo "  --rounds R   interleaved rounds (default 5)" >&2
}

[ $# -ge 2 ] || { usage; exit 2; }
AFTER_B=$(cd "$1" && pwd) || exit 2
if [ -d "$2" ]; then BEFORE_SBX=$(cd "$2" && pwd)/src/cli/sbx; else BEFORE_SBX=$2; fi
shift 2
N=200 ROUNDS=5 OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --n) N=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) usage; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups)" >&2; exit 1; }
ST=$AFTER_B/bench/sbx-bench-spawntime
for f in "$AFTER_B/src/cli/sbx" "$BEFORE_SBX" "$ST"; do
  [ -x "$f" ] || { echo "bench: $f missing; build first" >&2; exit 1; }
done
command -v bwrap >/dev/null || { echo "bench: bubblewrap is needed (scripts/deps.sh --bench)" >&2; exit 1; }
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi

OUT=${OUT:-$AFTER_B/bench-results/cli-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-cli.XXXXXX) || exit 1
# Private copies: a concurrent ninja relinking them would make spawns fail.
mkdir -p "$WORK/bin" "$WORK/rootfs"
cp "$BEFORE_SBX" "$WORK/bin/sbx-before" && cp "$AFTER_B/src/cli/sbx" "$WORK/bin/sbx-after" &&
  cp "$ST" "$WORK/bin/spawntime" || exit 1
ST=$WORK/bin/spawntime
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G

cleanup() {
  set +e
  "$WORK/bin/sbx-after" pool stop --all >/dev/null 2>&1
  "$WORK/bin/sbx-after" gc --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

R=$WORK/rootfs
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$R" "$BB" || exit 1
"$WORK/bin/sbx-after" image import bench-busybox "$R" >/dev/null || exit 1
declare -A ID
for v in before after; do
  ID[$v]=$("$WORK/bin/sbx-$v" create bench-busybox) || { echo "bench: create ($v) failed" >&2; exit 1; }
done
POOL=$("$WORK/bin/sbx-after" pool start -n $(( (N + ROUNDS - 1) / ROUNDS + 8 )) --env SBX_BENCH_POOL=1 bench-busybox) ||
  { echo "bench: sbx pool start failed" >&2; exit 1; }
BWRAP=(bwrap --unshare-all --die-with-parent --ro-bind "$R" / true)
"${BWRAP[@]}" || { echo "bench: bwrap cannot run here" >&2; exit 1; }

{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -r)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
  echo "after	$(git -C "$AFTER_B/.." rev-parse --short HEAD 2>/dev/null)"
  echo "before	$BEFORE_SBX"
  echo "bwrap	$(bwrap --version 2>/dev/null)"
  echo "pool	$POOL"
  echo "n	$N"
  echo "rounds	$ROUNDS"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
  [ -x "$AFTER_B/bench/sbx-bench-cpuid" ] && echo "cpuid_us	$("$AFTER_B/bench/sbx-bench-cpuid")"
} > "$OUT/host.tsv"

per_round=$(( (N + ROUNDS - 1) / ROUNDS ))
cases=(version-before version-after exec-before exec-after run-before run-after run-pool bwrap host-true cmd-true)
cmd_of() { # case -> the command line
  case $1 in
    version-*) echo "$WORK/bin/sbx-${1#version-} --version" ;;
    exec-*) echo "$WORK/bin/sbx-${1#exec-} exec ${ID[${1#exec-}]} -- true" ;;
    run-pool) echo "$WORK/bin/sbx-after run --env SBX_BENCH_POOL=1 bench-busybox -- true" ;;
    run-*) echo "$WORK/bin/sbx-${1#run-} run bench-busybox -- true" ;;
    bwrap) echo "${BWRAP[*]}" ;;
    host-true) echo "/bin/true" ;;
    cmd-true) echo "$BB true" ;;
    *) return 2 ;;
  esac
}
for c in "${cases[@]}"; do rm -f "$OUT/$c.samples"; done
echo "cli: $N runs per case in $ROUNDS interleaved rounds of $per_round (load $(cut -d' ' -f1 /proc/loadavg))"
for r in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2046 # the command is split on purpose (no spaces in its parts)
    if ! "$ST" --label "$c" --n "$per_round" --warmup 3 --samples "$OUT/$c.samples" -- $(cmd_of "$c") \
         > /dev/null 2> "$OUT/$c.err"; then
      echo "bench: $c failed in round $r: $(tail -n1 "$OUT/$c.err")" >&2
      exit 1
    fi
  done
  echo "  round $r/$ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/host.tsv"

python3 - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import sys
out = sys.argv[1]
def load(c):
    xs = sorted(float(l) for l in open(f"{out}/{c}.samples") if l.strip())
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    return {"n": len(xs), "med": q(0.5), "p90": q(0.9)}
host = dict(l.rstrip("\n").split("\t", 1) for l in open(f"{out}/host.tsv"))
s = {c: load(c) for c in ["version-before", "version-after", "exec-before", "exec-after",
                          "run-before", "run-after", "run-pool", "bwrap", "host-true", "cmd-true"]}
bw = s["bwrap"]["med"]
print(f"load average {host['load_start']} at the start, {host['load_end']} at the end; "
      f"{s['bwrap']['n']} runs per row\n")
print("| command | before median ms | before p90 | after median ms | after p90 | after/before | after/bwrap | target |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
targets = {"exec": "≤ 0.3x bwrap", "run": "≤ 0.7x bwrap", "version": ""}
names = {"version": "`sbx --version`", "exec": "`sbx exec ID -- true`", "run": "`sbx run IMAGE -- true`"}
for k in ["version", "exec", "run"]:
    b, a = s[k + "-before"], s[k + "-after"]
    print(f"| {names[k]} | {b['med']:.2f} | {b['p90']:.2f} | **{a['med']:.2f}** | {a['p90']:.2f} | "
          f"{a['med'] / b['med']:.2f}x | **{a['med'] / bw:.2f}x** | {targets[k]} |")
r = s["run-pool"]
print(f"| `sbx run` from a warm pool (`sbx pool start`, teardown handed off) | | | **{r['med']:.2f}** | {r['p90']:.2f} | "
      f"{r['med'] / s['run-after']['med']:.2f}x of cold | **{r['med'] / bw:.2f}x** | ≤ 0.7x bwrap |")
for k, name in [("bwrap", "`bwrap --unshare-all ... true` (peer)"), ("host-true", "host `/bin/true` (floor)"),
                ("cmd-true", "`busybox true` on the host (the command's own start)")]:
    print(f"| {name} | | | {s[k]['med']:.2f} | {s[k]['p90']:.2f} | | {s[k]['med'] / bw:.2f}x | |")
floor = s["host-true"]["med"] + s["cmd-true"]["med"]
cpuid = f", one CPUID {host['cpuid_us']} µs" if "cpuid_us" in host else ""
print(f"\nFloor of any `sbx exec ID -- true` here (two process starts: host `/bin/true` + `busybox true`): "
      f"{floor:.2f} ms = {floor / bw:.2f}x bwrap{cpuid}.")
EOF
echo
echo "results: $OUT"
