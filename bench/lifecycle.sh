#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lifecycle benchmark, sbx side by side with bubblewrap and crun, in one run:
#   latency     create -> exec `true` -> destroy, N times (rounds interleaved)
#   throughput  lifecycles/s with 2 and 4 workers (both cores busy)
#   density     idle sandboxes alive at each count, host memory per sandbox
# Everything it makes lives in a private temp dir (rootfs, image store, sbx
# state, OCI bundle) and is removed on exit, with any container, sandbox,
# cgroup or mount it created. Results (JSON, raw samples, summary.md) are kept
# in BUILD_DIR/bench-results/<timestamp>/. See bench/README.md.
set -uo pipefail

usage() {
  cat <<EOF
usage: bench/lifecycle.sh BUILD_DIR [--quick] [--n N] [--rounds R] [--seconds S]
                          [--counts LIST] [--no-throughput] [--no-density] [--out DIR]
  --quick          N=100, 5 s throughput, density at 100,1000
  --n N            lifecycles per tool for latency (default 1000)
  --rounds R       split N into R interleaved rounds per tool (default 5)
  --seconds S      throughput window per measurement (default 20)
  --counts LIST    density counts (default 100,1000,3000,5000)
EOF
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd) || exit 2
shift
N=1000 ROUNDS=5 SECONDS_T=20 COUNTS=100,1000,3000,5000 DO_TPUT=1 DO_DENSITY=1 OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) N=100 SECONDS_T=5 COUNTS=100,1000 ;;
    --n) N=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --seconds) SECONDS_T=$2; shift ;;
    --counts) COUNTS=$2; shift ;;
    --no-throughput) DO_TPUT=0 ;;
    --no-density) DO_DENSITY=0 ;;
    --out) OUT=$2; shift ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

SRC=$(cd "$(dirname "$0")/.." && pwd)
SBX=$BUILD/src/cli/sbx
LC=$BUILD/bench/sbx-bench-lifecycle
ST=$BUILD/bench/sbx-bench-spawntime
for f in "$LC" "$ST"; do
  [ -x "$f" ] || { echo "bench: $f missing; build first (ninja -C $BUILD)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups, crun)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench: python3 is needed for the bundle and the summary" >&2; exit 1; }

OUT=${OUT:-$BUILD/bench-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench.XXXXXX) || exit 1
ROOTFS=$WORK/rootfs BUNDLE=$WORK/bundle
# Private copies of the binaries: a concurrent `ninja` relinking them mid-run
# would otherwise make a spawn fail with ETXTBSY/EACCES.
mkdir -p "$WORK/bin"
cp "$LC" "$ST" "$WORK/bin/" || exit 1
LC=$WORK/bin/$(basename "$LC") ST=$WORK/bin/$(basename "$ST")
if [ -x "$SBX" ]; then cp "$SBX" "$WORK/bin/sbx" && SBX=$WORK/bin/sbx; fi
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (umounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G
mkdir -p "$SBX_IMAGE_DIR" "$SBX_STATE_DIR"
IMAGE=bench-busybox
CRUN_PREFIX=sbxbench-$$
MOUNTED_HUGETLB=0
NOTES=$OUT/notes.tsv
: > "$NOTES"

note() { printf '%s\t%s\n' "$1" "$2" >> "$NOTES"; echo "bench: $1: $2" >&2; }
log() { printf '\n== %s\n' "$*"; }

cleanup() {
  set +e
  # Sandboxes left by an interrupted run (private state dir, so only ours).
  if [ -x "$SBX" ]; then "$SBX" gc --all >/dev/null 2>&1; fi
  if command -v crun >/dev/null; then
    for id in $(crun list -q 2>/dev/null | grep "^$CRUN_PREFIX-"); do crun delete -f "$id" >/dev/null 2>&1; done
  fi
  for d in /sys/fs/cgroup/*/"$CRUN_PREFIX"-*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  if [ "$MOUNTED_HUGETLB" = 1 ]; then
    umount /sys/fs/cgroup/hugetlb && rmdir /sys/fs/cgroup/hugetlb 2>/dev/null
  fi
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- host facts --------------------------------------------------------------
{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -r)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
  echo "mem	$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "git	$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null)"
  echo "n	$N"
  echo "rounds	$ROUNDS"
  echo "seconds	$SECONDS_T"
  echo "counts	$COUNTS"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "bwrap	$(bwrap --version 2>/dev/null)"
  echo "crun	$(crun --version 2>/dev/null | head -n1)"
  echo "cgroups	$(mount -t cgroup2 | awk '{print $3}' | head -n1 | sed 's/^/v2 at /'), v1: $(mount -t cgroup | awk '{print $3}' | xargs -n1 basename | paste -sd, -)"
} > "$OUT/host.tsv"

# --- rootfs: busybox-static plus its applet links ------------------------------
log "rootfs"
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
  echo "bench: a static busybox is needed (Debian: busybox-static; scripts/deps.sh installs it)" >&2
  exit 1
fi
# shellcheck source=rootfs.sh
. "$(dirname "$0")/rootfs.sh"
bench_rootfs "$ROOTFS" "$BB" || exit 1
echo "rootfs $ROOTFS: $(find "$ROOTFS" | wc -l) entries, $(du -sh "$ROOTFS" | cut -f1)"

# --- which tools can run --------------------------------------------------------
declare -A OK
log "setup"

# sbx: import the rootfs into the private store, then one `sbx run`.
OK[sbx]=0
if [ ! -x "$SBX" ]; then
  note sbx "not built ($SBX missing)"
elif ! msg=$("$SBX" image import "$IMAGE" "$ROOTFS" 2>&1 >/dev/null); then
  note sbx "cannot import the image: $(echo "$msg" | tail -n1)"
elif ! msg=$("$SBX" run "$IMAGE" -- true 2>&1 >/dev/null); then
  note sbx "cannot run: $(echo "$msg" | tail -n1)"
else
  OK[sbx]=1
  echo "sbx: ok (image $IMAGE in $SBX_IMAGE_DIR)"
fi

# bubblewrap.
BWRAP=(bwrap --unshare-all --die-with-parent --ro-bind "$ROOTFS" /)
OK[bwrap]=0
if ! command -v bwrap >/dev/null; then
  note bwrap "not installed (scripts/deps.sh --bench)"
elif ! msg=$("${BWRAP[@]}" true 2>&1); then
  note bwrap "cannot run: $msg"
else
  OK[bwrap]=1
  echo "bwrap: ok"
fi

# crun: an OCI bundle of the same rootfs. Namespaces as bwrap --unshare-all
# except user (a root container needs no mapping): pid, net, ipc, uts, mount,
# cgroup; read-only root; crun's default /proc, /dev, /sys mounts kept.
OK[crun]=0
CRUN=(crun)
crun_try() {
  "${CRUN[@]}" run --bundle "$BUNDLE" "$CRUN_PREFIX-probe-$1" 2>&1 >/dev/null
}
if ! command -v crun >/dev/null; then
  note crun "not installed (scripts/deps.sh --bench)"
else
  mkdir -p "$BUNDLE"
  (cd "$BUNDLE" && crun spec) || note crun "crun spec failed"
  python3 - "$BUNDLE/config.json" "$ROOTFS" <<'EOF'
import json, sys
path, rootfs = sys.argv[1], sys.argv[2]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["args"] = ["true"]
c["process"]["terminal"] = False
ns = c["linux"].setdefault("namespaces", [])
if not any(n["type"] == "cgroup" for n in ns):
    ns.append({"type": "cgroup"})
json.dump(c, open(path, "w"), indent=2)
EOF
  if msg=$(crun_try 0); then
    OK[crun]=1
    echo "crun: ok as is"
  else
    first=$msg
    # Hybrid layout: crun refuses while cgroup v2 still holds a controller
    # (hugetlb, the one v1 hierarchy not mounted). Mount it on v1 for the run.
    if echo "$msg" | grep -q 'hybrid mode' && [ ! -e /sys/fs/cgroup/hugetlb ] &&
       grep -qw hugetlb /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null; then
      if mkdir /sys/fs/cgroup/hugetlb && mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb; then
        MOUNTED_HUGETLB=1
        if msg=$(crun_try 1); then
          OK[crun]=1
          note crun "needed a v1 hugetlb hierarchy at /sys/fs/cgroup/hugetlb (mounted for this run, unmounted after); first error was: $first"
        fi
      else
        rmdir /sys/fs/cgroup/hugetlb 2>/dev/null
      fi
    fi
    if [ "${OK[crun]}" = 0 ]; then
      CRUN=(crun --cgroup-manager=disabled)
      if msg2=$(crun_try 2); then
        OK[crun]=1
        note crun "runs only with --cgroup-manager=disabled (no cgroups, so cheaper than sbx); first error was: $first"
      else
        CRUN=(crun)
        note crun "cannot run on this host: $first; with --cgroup-manager=disabled: $msg2"
      fi
    fi
  fi
fi

# --- latency ----------------------------------------------------------------
per_round=$(( (N + ROUNDS - 1) / ROUNDS ))
log "latency: create -> exec true -> destroy, $N per tool in $ROUNDS interleaved rounds of $per_round"
lat_run() { # tool round
  local t=$1 r=$2 lab
  local common=(--n "$per_round" --warmup 3 --samples "$OUT/lat-$t.samples" --json)
  case $t in
    sbx) "$LC" --mode latency --image "$IMAGE" --label "sbx (library)" "${common[@]}" ;;
    sbx-nopool) SBX_NS_POOL=0 "$LC" --mode latency --image "$IMAGE" --label "sbx (library), SBX_NS_POOL=0" "${common[@]}" ;;
    sbx-userns-host) "$LC" --mode latency --image "$IMAGE" --userns host --label "sbx (library), userns=host" "${common[@]}" ;;
    sbx-cli) "$ST" --label "sbx run (CLI)" "${common[@]}" -- "$SBX" run "$IMAGE" -- true ;;
    bwrap) "$ST" --label bwrap "${common[@]}" -- "${BWRAP[@]}" true ;;
    crun) "$ST" --label crun "${common[@]}" -- "${CRUN[@]}" run --bundle "$BUNDLE" "$CRUN_PREFIX-r$r-{i}" ;;
    host-true) "$ST" --label "host /bin/true" "${common[@]}" -- /bin/true ;;
    *) return 2 ;;
  esac
}
TOOLS=(sbx sbx-userns-host sbx-nopool sbx-cli bwrap crun host-true)
OK[sbx-cli]=${OK[sbx]}
OK[sbx-nopool]=${OK[sbx]} # without the background namespace pool (docs/local-provider.md)
OK[sbx-userns-host]=${OK[sbx]} # without user namespaces: what they cost (docs/security.md)
OK[host-true]=1 # spawn+wait of a plain process: the floor under the CLI tools
for t in "${TOOLS[@]}"; do rm -f "$OUT/lat-$t.samples" "$OUT/lat-$t.jsonl"; done
for r in $(seq 1 "$ROUNDS"); do
  for t in "${TOOLS[@]}"; do
    [ "${OK[$t]}" = 1 ] || continue
    if ! lat_run "$t" "$r" >> "$OUT/lat-$t.jsonl" 2> "$OUT/lat-$t.err"; then
      OK[$t]=0
      note "$t" "latency round $r failed: $(tail -n1 "$OUT/lat-$t.err")"
      rm -f "$OUT/lat-$t.samples"
    else
      sed -n 1p "$OUT/lat-$t.err"
    fi
  done
done

# --- throughput ---------------------------------------------------------------
if [ "$DO_TPUT" = 1 ]; then
  log "throughput: ${SECONDS_T}s windows, 2 and 4 workers"
  for w in 2 4; do
    for t in sbx bwrap crun; do
      [ "${OK[$t]}" = 1 ] || continue
      f=$OUT/tput-$t-w$w.json
      case $t in
        sbx) "$LC" --mode throughput --image "$IMAGE" --workers "$w" --seconds "$SECONDS_T" --json > "$f" ;;
        bwrap) "$ST" --label bwrap --workers "$w" --seconds "$SECONDS_T" --json -- "${BWRAP[@]}" true > "$f" ;;
        crun) "$ST" --label crun --workers "$w" --seconds "$SECONDS_T" --json -- \
                "${CRUN[@]}" run --bundle "$BUNDLE" "$CRUN_PREFIX-t$w-{i}" > "$f" ;;
        *) ;;
      esac || note "$t" "throughput with $w workers failed"
    done
  done
fi

# --- density ------------------------------------------------------------------
if [ "$DO_DENSITY" = 1 ]; then
  log "density: idle sandboxes at $COUNTS"
  if [ "${OK[sbx]}" = 1 ]; then
    "$LC" --mode density --image "$IMAGE" --counts "$COUNTS" --json > "$OUT/density-sbx.json" ||
      note sbx "density stopped early (see density-sbx.json)"
  fi
  if [ "${OK[bwrap]}" = 1 ]; then
    "$ST" --label bwrap --hold "$COUNTS" --json -- "${BWRAP[@]}" sleep 999999999 > "$OUT/density-bwrap.json" ||
      note bwrap "density stopped early (see density-bwrap.json)"
  fi
fi

# --- summary ------------------------------------------------------------------
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/host.tsv"
log "summary"
python3 "$SRC/bench/summarize.py" "$OUT" | tee "$OUT/summary.md"
echo
echo "results: $OUT"
