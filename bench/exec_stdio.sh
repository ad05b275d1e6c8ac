#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cost of `sbx exec` copying the command's stdio through pipes (src/cli/exec_io.c)
# instead of handing the sandbox the CLI's own fds: two sbx CLIs, side by side
# in interleaved rounds on one sandbox each, for
#   true          sbx exec ID -- true                (stdin, stdout /dev/null)
#   true-stdin    sbx exec ID -- true < FILE         (stdin forwarded)
#   out10-null    sbx exec ID -- head -c 10MiB /dev/zero > /dev/null
#   out10-file    the same > FILE
#   in10          sbx exec ID -- wc -c < 10 MiB FILE
# BEFORE_BUILD is a build of the code before the change, e.g.
#   git worktree add --detach /tmp/sbx-before <commit> &&
#   meson setup /tmp/sbx-before/build --buildtype=debugoptimized && ninja -C /tmp/sbx-before/build
# Results (raw samples: wall and CLI CPU in ms per run; summary.md) go to BUILD/bench-results/exec-stdio-<timestamp>/.
set -uo pipefail

usage() {
  echo "usage: bench/exec_stdio.sh BUILD_DIR BEFORE_BUILD_DIR [--n N] [--rounds R] [--out DIR]" >&2
  echo "  --n N        runs per case, CLI and round (default 40; 10 MiB cases N/4)" >&2
  echo "  --rounds R   interleaved rounds (default 5)" >&2
}

[ $# -ge 2 ] || { usage; exit 2; }
AFTER_B=$(cd "$1" && pwd) || exit 2
BEFORE_B=$(cd "$2" && pwd) || exit 2
shift 2
N=40 ROUNDS=5 OUT=
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
for f in "$AFTER_B/src/cli/sbx" "$BEFORE_B/src/cli/sbx"; do
  [ -x "$f" ] || { echo "bench: $f missing; build first" >&2; exit 1; }
done
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi

OUT=${OUT:-$AFTER_B/bench-results/exec-stdio-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-stdio.XXXXXX) || exit 1
# Private copies: a concurrent ninja relinking them would make spawns fail.
mkdir -p "$WORK/bin" "$WORK/rootfs"
cp "$BEFORE_B/src/cli/sbx" "$WORK/bin/sbx-before" && cp "$AFTER_B/src/cli/sbx" "$WORK/bin/sbx-after" || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (umounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G

cleanup() {
  set +e
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
head -c 10485760 /dev/zero > "$WORK/in10"
: > "$WORK/small"

declare -A ID
for v in before after; do
  ID[$v]=$("$WORK/bin/sbx-$v" create bench-busybox) || { echo "bench: create ($v) failed" >&2; exit 1; }
done

{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -r)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
  echo "before	$(git -C "$BEFORE_B/.." rev-parse --short HEAD 2>/dev/null)"
  echo "after	$(git -C "$AFTER_B/.." rev-parse --short HEAD 2>/dev/null) + working tree"
  echo "n	$N"
  echo "rounds	$ROUNDS"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/host.tsv"

# The runs: one python process spawns each `sbx exec` with its stdio set as
# a user's shell would, and takes wall time and the CLI's own CPU (user + sys
# from wait4: its pump thread included, the sandbox's processes not, they are
# init's children). The command's CPU comes from init's cutime + cstime
# (init reaps it), in clock ticks, so only as a mean over a round's runs.
# CPU is what the change adds; wall also moves with the host's load.
python3 - "$OUT" "$WORK" "$N" "$ROUNDS" "${ID[before]}" "${ID[after]}" <<'EOF' || exit 1
import json, os, subprocess, sys, time
out, work, n, rounds, ids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    {"before": sys.argv[5], "after": sys.argv[6]}
rows = json.loads(subprocess.check_output([f"{work}/bin/sbx-after", "ls", "--json"]))
pid = {v: next(r["pid"] for r in rows if r["id"] == ids[v]) for v in ids}
HZ = os.sysconf("SC_CLK_TCK")
def child_cpu_ms(v):  # init's reaped children: user + system
    f = open(f"/proc/{pid[v]}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[13]) + int(f[14])) * 1e3 / HZ
HEAD = ["head", "-c", "10485760", "/dev/zero"]
cases = {  # name: (command, stdin, stdout, runs per round)
    "true": (["true"], "/dev/null", "/dev/null", n),
    "true-stdin": (["true"], f"{work}/small", "/dev/null", n),
    "out10-null": (HEAD, "/dev/null", "/dev/null", (n + 3) // 4),
    "out10-file": (HEAD, "/dev/null", f"{work}/out", (n + 3) // 4),
    "in10": (["wc", "-c"], f"{work}/in10", "/dev/null", (n + 3) // 4),
}
def once(v, cmd, i, o):
    with open(i, "rb") as fi, open(o, "wb") as fo:
        t0 = time.perf_counter()
        p = subprocess.Popen([f"{work}/bin/sbx-{v}", "exec", ids[v], "--"] + cmd, stdin=fi, stdout=fo,
                             stderr=subprocess.DEVNULL)
        _, st, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = 0
    if st != 0:
        sys.exit(f"bench: {cmd} with the {v} CLI: wait status {st}")
    return wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3
for r in range(rounds):
    print(f"== round {r + 1}/{rounds}", flush=True)
    for c, (cmd, i, o, k) in cases.items():
        # Alternate which CLI goes first, so drift hits both alike.
        for v in (("before", "after") if r % 2 == 0 else ("after", "before")):
            once(v, cmd, i, o)  # warm-up
            c0 = child_cpu_ms(v)
            with open(f"{out}/{c}-{v}.samples", "a") as f:
                for _ in range(k):
                    f.write("%.4f %.4f\n" % once(v, cmd, i, o))
            with open(f"{out}/{c}-{v}.cmdcpu", "a") as f:
                f.write("%d %.1f\n" % (k, child_cpu_ms(v) - c0))
EOF
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/host.tsv"

python3 - "$OUT" true true-stdin out10-null out10-file in10 > "$OUT/summary.md" <<'EOF'
import statistics, sys
out, cases = sys.argv[1], sys.argv[2:]
def load(c, v):
    with open(f"{out}/{c}-{v}.samples") as f:
        rows = [l.split() for l in f if l.strip()]
    return [float(r[0]) for r in rows], [float(r[1]) for r in rows]
def d(a, b):
    return f"{a - b:+.2f} ({(a - b) / b * 100:+.0f} %)" if b else f"{a - b:+.2f}"
def cmd_cpu(c, v):  # mean ms per run
    with open(f"{out}/{c}-{v}.cmdcpu") as f:
        rows = [l.split() for l in f if l.strip()]
    return sum(float(r[1]) for r in rows) / sum(int(r[0]) for r in rows)
print("| case | wall before ms | wall after ms | wall delta | CLI CPU before | CLI CPU after | CLI CPU delta "
      "| command CPU before | command CPU after | runs each |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in cases:
    (wb, cb), (wa, ca) = load(c, "before"), load(c, "after")
    mw = [statistics.median(x) for x in (wb, wa)]
    mc = [statistics.median(x) for x in (cb, ca)]
    print(f"| {c} | {mw[0]:.2f} | {mw[1]:.2f} | {d(mw[1], mw[0])} | {mc[0]:.2f} | {mc[1]:.2f} | "
          f"{d(mc[1], mc[0])} | {cmd_cpu(c, 'before'):.2f} | {cmd_cpu(c, 'after'):.2f} | {len(wa)} |")
print("\nms. Wall and CLI CPU (user + sys of the `sbx exec` process, from wait4): medians. "
      "Command CPU (what ran in the sandbox, from init's reaped-children times): mean per run.")
EOF
echo
cat "$OUT/host.tsv"
echo
cat "$OUT/summary.md"
echo "bench: results in $OUT"
