#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark of `sbx serve` through the official e2b npm SDK (2.51.0):
# create -> commands.run('true') -> kill, sequential and at concurrency 32,
# plus the server's creates/s from GET /metrics; then the same lifecycle
# through sbx's own `e2b` provider (its C client, BUILD_DIR/bench/sbx-bench-serve-c)
# against the same server, and the SDK/C ratio of p50 and p99. See
# docs/performance.md, section "sbx serve through the E2B SDK".
#   bench/serve.sh BUILD_DIR [--seq N] [--conc C] [--total M] [--burst B] [--warmup W] [--out DIR]
#                  [--server SBX_BINARY]   (another build's sbx as the server, e.g. to compare)
# Everything runs against a private image store and state dir under /tmp,
# removed on exit with any sandbox left. The SDK comes from the compat cache
# ($SBX_COMPAT_CACHE, default BUILD_DIR/compat-cache; installed if missing).
# Results: BUILD_DIR/bench-results/serve-<timestamp>/ (summary.md, result.json,
# server.log, host.tsv).
set -uo pipefail

usage() { echo "usage: bench/serve.sh BUILD_DIR [--seq N] [--conc C] [--total M] [--burst B] [--warmup W] [--out DIR] [--server SBX]"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
BUILD=$(cd "$1" && pwd) || exit 2
shift
SEQ=200 CONC=32 TOTAL=320 BURST=128 WARMUP=5 OUT= SDKV=2.51.0 SERVER=
while [ $# -gt 0 ]; do
  case "$1" in
    --seq) SEQ=$2; shift ;;
    --conc) CONC=$2; shift ;;
    --total) TOTAL=$2; shift ;;
    --burst) BURST=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --out) OUT=$2; shift ;;
    --server) SERVER=$2; shift ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

SRC=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups)" >&2; exit 1; }
command -v node >/dev/null || { echo "bench: node is needed (scripts/deps.sh)" >&2; exit 1; }
[ -x "$BUILD/src/cli/sbx" ] || { echo "bench: $BUILD/src/cli/sbx missing; build first" >&2; exit 1; }
CACHE=${SBX_COMPAT_CACHE:-$BUILD/compat-cache}
bash "$SRC/tests/compat/install.sh" "$CACHE" "$SDKV" || exit 1

OUT=${OUT:-$BUILD/bench-results/serve-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-serve.XXXXXX) || exit 1
# A private copy: a concurrent `ninja` relinking sbx mid-run breaks spawns.
mkdir -p "$WORK/bin" && cp "$BUILD/src/cli/sbx" "$WORK/bin/sbx" || exit 1
cp "${SERVER:-$BUILD/src/cli/sbx}" "$WORK/bin/sbx-server" || exit 1
cp "$BUILD/bench/sbx-bench-serve-c" "$WORK/bin/" || { echo "bench: $BUILD/bench/sbx-bench-serve-c missing; build first" >&2; exit 1; }
SBX=$WORK/bin/sbx
export SBX_IMAGE_DIR=$WORK/images SBX_STATE_DIR=$WORK/state
# writable layers on a scratch file system of this run (umounted on exit)
export SBX_SCRATCH_DIR=$WORK/scratch SBX_SCRATCH_SIZE=8G
mkdir -p "$SBX_IMAGE_DIR" "$SBX_STATE_DIR"
PID=
cleanup() {
  set +e
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"; for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null; wait "$PID" 2>/dev/null
  fi
  "$SBX" rm --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

{
  echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "kernel	$(uname -r)"
  echo "cpu	$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
  echo "mem	$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "git	$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null)"
  echo "server	${SERVER:-$BUILD/src/cli/sbx}"
  echo "node	$(node --version)"
  echo "sdk	e2b@$SDKV"
  echo "build	$(basename "$BUILD") $(meson introspect --buildoptions "$BUILD" 2>/dev/null | python3 -c 'import json,sys; print(" ".join(o["name"]+"="+str(o["value"]) for o in json.load(sys.stdin) if o["name"] in ("buildtype","b_sanitize")))' 2>/dev/null)"
  echo "load_start	$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/host.tsv"

bash "$SRC/tests/compat/mkimage.sh" "$SBX" bash || exit 1
"$WORK/bin/sbx-server" serve --listen 127.0.0.1:0 --state-dir "$SBX_STATE_DIR" --default-template bash --no-access-log \
  >"$OUT/server.log" 2>&1 &
PID=$!
URL= KEYFILE=
for _ in $(seq 1 300); do
  if line=$(grep -m1 'ready url=' "$OUT/server.log" 2>/dev/null); then
    URL=$(sed -n 's/.*ready url=\([^ ]*\).*/\1/p' <<<"$line")
    KEYFILE=$(sed -n 's/.*key_file=\([^ ]*\).*/\1/p' <<<"$line")
    break
  fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$URL" ] || { echo "bench: sbx serve did not start:"; cat "$OUT/server.log"; exit 1; }
KEYFILE=${KEYFILE:-$SBX_STATE_DIR/server/api-key}
export E2B_API_URL=$URL E2B_SANDBOX_URL=$URL
E2B_API_KEY=$(head -n1 "$KEYFILE"); export E2B_API_KEY
unset E2B_DOMAIN E2B_DEBUG

rc=0
node "$SRC/bench/serve_sdk.mjs" "$CACHE/e2b-$SDKV" --seq "$SEQ" --conc "$CONC" --total "$TOTAL" --burst "$BURST" \
  --warmup "$WARMUP" --json "$OUT/result.json" | tee "$OUT/summary.md" || rc=1
# The same lifecycle through the e2b provider's C client, same server (key by file).
echo | tee -a "$OUT/summary.md"
env -u E2B_API_KEY E2B_API_KEY_FILE="$KEYFILE" "$WORK/bin/sbx-bench-serve-c" --seq "$SEQ" --conc "$CONC" --total "$TOTAL" \
  --warmup "$WARMUP" --template base --state "$WORK/c-state" --json "$OUT/result-c.json" | tee -a "$OUT/summary.md" || rc=1
python3 - "$OUT/result.json" "$OUT/result-c.json" <<'PY' | tee -a "$OUT/summary.md"
import json, sys
try:
    sdk, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    sys.exit(f"no ratio: {e}")
print()
for ph, key in (("sequential", "sequential"), ("concurrent", "concurrent")):
    s, k = sdk[key]["total"], c[key]
    print(f"SDK / C client, {ph}: p50 {s['p50']:.1f} / {k['median_ms']:.1f} ms = {s['p50'] / k['median_ms']:.2f}x, "
          f"p99 {s['p99']:.1f} / {k['p99_ms']:.1f} ms = {s['p99'] / k['p99_ms']:.2f}x")
PY
echo "server threads at the end	$(awk '/^Threads/ {print $2}' /proc/$PID/status 2>/dev/null)" >>"$OUT/host.tsv"
echo "load_end	$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/host.tsv"
left=$("$SBX" ls --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).length))')
[ "$left" = 0 ] || { echo "bench: $left sandbox(es) left behind"; rc=1; }
echo "results: $OUT"
exit $rc
