#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cost of `sbx exec -t` (a terminal made inside the sandbox, its master pumped
# by the CLI: src/cli/exec_tty.c) next to the pipes of a plain `sbx exec`
# (src/cli/exec_io.c, measured against the fd hand-over by exec_stdio.sh), on
# one build and one idle busybox sandbox, in interleaved rounds:
#   true            exec [-t] ID -- true             stdin, stdout /dev/null
#   true-term       exec [-it] ID -- true            stdio a host pty (raw mode under -it)
#   out10-null      exec [-t] ID -- head -c 10MiB /dev/zero > /dev/null
#   out10-term      the same, stdout a host pty the harness reads
# Results (raw samples: wall and CLI CPU in ms per run; summary.md) go to
# BUILD/bench-results/exec-tty-<timestamp>/.
set -uo pipefail

usage() {
  echo "usage: bench/exec_tty.sh BUILD_DIR [--n N] [--rounds R] [--out DIR]" >&2
  echo "  --n N        runs per case, mode and round (default 40; 10 MiB cases N/4)" >&2
  echo "  --rounds R   interleaved rounds (default 5)" >&2
}

[ $# -ge 1 ] || { usage; exit 2; }
B=$(cd "$1" && pwd) || exit 2
shift
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
[ -x "$B/src/cli/sbx" ] || { echo "bench: $B/src/cli/sbx missing; build first" >&2; exit 1; }
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static)" >&2
  exit 1
fi

OUT=${OUT:-$B/bench-results/exec-tty-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-tty.XXXXXX) || exit 1
# A private copy: a concurrent ninja relinking it would make spawns fail.
mkdir -p "$WORK/bin" "$WORK/rootfs"
cp "$B/src/cli/sbx" "$WORK/bin/sbx" || exit 1
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state

cleanup() {
  set +e
  "$WORK/bin/sbx" gc --all >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

R=$WORK/rootfs
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$R" "$BB" || exit 1
"$WORK/bin/sbx" image import bench-busybox "$R" >/dev/null || exit 1
ID=$("$WORK/bin/sbx" create bench-busybox) || { echo "bench: create failed" >&2; exit 1; }

{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -r)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
  echo "build	$(git -C "$B/.." rev-parse --short HEAD 2>/dev/null) + working tree"
  echo "n	$N"
  echo "rounds	$ROUNDS"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/host.tsv"

# One python process spawns each `sbx exec`, as exec_stdio.sh does: wall time
# and the CLI's own CPU (user + sys from wait4); the command's CPU from
# init's reaped-children times, as a mean over a round's runs. For the
# *-term cases each run gets a fresh host pty whose master a thread drains,
# as a terminal emulator would.
python3 - "$OUT" "$WORK" "$N" "$ROUNDS" "$ID" <<'EOF' || exit 1
import json, os, pty, subprocess, sys, threading, time
out, work, n, rounds, sid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = json.loads(subprocess.check_output([f"{work}/bin/sbx", "ls", "--json"]))
pid = next(r["pid"] for r in rows if r["id"] == sid)
HZ = os.sysconf("SC_CLK_TCK")
def child_cpu_ms():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[13]) + int(f[14])) * 1e3 / HZ
HEAD = ["head", "-c", "10485760", "/dev/zero"]
cases = {  # name: (command, terminal stdio, runs per round)
    "true": (["true"], False, n),
    "true-term": (["true"], True, n),
    "out10-null": (HEAD, False, (n + 3) // 4),
    "out10-term": (HEAD, True, (n + 3) // 4),
}
def drain(m):
    try:
        while os.read(m, 65536):
            pass
    except OSError:
        pass
def once(mode, cmd, term):
    flags = {"pipes": [], "tty": ["-it" if term else "-t"]}[mode]
    argv = [f"{work}/bin/sbx", "exec"] + flags + [sid, "--"] + cmd
    m = s = None
    if term:
        m, s = pty.openpty()
        fi = fo = s
        t = threading.Thread(target=drain, args=(m,))
        t.start()
    else:
        fi, fo = os.open("/dev/null", os.O_RDONLY), os.open("/dev/null", os.O_WRONLY)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=fi, stdout=fo, stderr=subprocess.DEVNULL if not term else fo)
    _, st, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = 0
    os.close(fi)
    if fo != fi:
        os.close(fo)
    if term:
        t.join()
        os.close(m)
    if st != 0:
        sys.exit(f"bench: {argv}: wait status {st}")
    return wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3
for r in range(rounds):
    print(f"== round {r + 1}/{rounds}", flush=True)
    for c, (cmd, term, k) in cases.items():
        for mode in (("pipes", "tty") if r % 2 == 0 else ("tty", "pipes")):
            once(mode, cmd, term)  # warm-up
            c0 = child_cpu_ms()
            with open(f"{out}/{c}-{mode}.samples", "a") as f:
                for _ in range(k):
                    f.write("%.4f %.4f\n" % once(mode, cmd, term))
            with open(f"{out}/{c}-{mode}.cmdcpu", "a") as f:
                f.write("%d %.1f\n" % (k, child_cpu_ms() - c0))
EOF
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/host.tsv"

python3 - "$OUT" true true-term out10-null out10-term > "$OUT/summary.md" <<'EOF'
import statistics, sys
out, cases = sys.argv[1], sys.argv[2:]
def load(c, v):
    with open(f"{out}/{c}-{v}.samples") as f:
        rows = [l.split() for l in f if l.strip()]
    return [float(r[0]) for r in rows], [float(r[1]) for r in rows]
def d(a, b):
    return f"{a - b:+.2f} ({(a - b) / b * 100:+.0f} %)" if b else f"{a - b:+.2f}"
def cmd_cpu(c, v):
    with open(f"{out}/{c}-{v}.cmdcpu") as f:
        rows = [l.split() for l in f if l.strip()]
    return sum(float(r[1]) for r in rows) / sum(int(r[0]) for r in rows)
print("| case | wall pipes ms | wall -t ms | wall delta | CLI CPU pipes | CLI CPU -t | CLI CPU delta "
      "| command CPU pipes | command CPU -t | runs each |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c in cases:
    (wb, cb), (wa, ca) = load(c, "pipes"), load(c, "tty")
    mw = [statistics.median(x) for x in (wb, wa)]
    mc = [statistics.median(x) for x in (cb, ca)]
    print(f"| {c} | {mw[0]:.2f} | {mw[1]:.2f} | {d(mw[1], mw[0])} | {mc[0]:.2f} | {mc[1]:.2f} | "
          f"{d(mc[1], mc[0])} | {cmd_cpu(c, 'pipes'):.2f} | {cmd_cpu(c, 'tty'):.2f} | {len(wa)} |")
print("\nms. Wall and CLI CPU (user + sys of the `sbx exec` process, from wait4): medians. "
      "Command CPU (what ran in the sandbox, from init's reaped-children times): mean per run.")
EOF
echo
cat "$OUT/host.tsv"
echo
cat "$OUT/summary.md"
echo "bench: results in $OUT"
