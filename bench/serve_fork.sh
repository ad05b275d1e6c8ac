#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Snapshots and fork of `sbx serve` through the official e2b npm SDK (2.51.0;
# bench/serve_fork.mjs), then, in the same run and on the same kind of
# scratch file system, the library's own fork(N) and snapshot (bench/fork.sh's
# driver, sbx-bench-fork) as the peer. See docs/performance.md, "Fork and
# snapshots through sbx serve".
#   bench/serve_fork.sh BUILD_DIR [--rounds R] [--n N] [--mb SIZE]
set -uo pipefail
usage() { echo "usage: bench/serve_fork.sh BUILD_DIR [--rounds R] [--n N] [--mb SIZE]"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
shift
ROUNDS=7 N=8 MB=100 SDKV=2.51.0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift ;;
    --n) N=$2; shift ;;
    --mb) MB=$2; shift ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
SRC=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (namespaces, cgroups)" >&2; exit 1; }
command -v node >/dev/null || { echo "bench: node is needed (scripts/deps.sh)" >&2; exit 1; }
[ -x "$BUILD/src/cli/sbx" ] && [ -x "$BUILD/bench/sbx-bench-fork" ] || { echo "bench: build $BUILD first" >&2; exit 1; }
CACHE=${SBX_COMPAT_CACHE:-$BUILD/compat-cache}
bash "$SRC/tests/compat/install.sh" "$CACHE" "$SDKV" >/dev/null || exit 1
WORK=$(mktemp -d /tmp/sbx-bench-sfork.XXXXXX) || exit 1
mkdir -p "$WORK/bin" && cp "$BUILD/src/cli/sbx" "$WORK/bin/sbx" || exit 1
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
  "$SBX" gc --all >/dev/null 2>&1
  umount -l "$WORK/scratch" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "host: $(uname -srm), $(nproc) cpus, sbx $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null), load $(cut -d' ' -f1-3 /proc/loadavg)"
bash "$SRC/tests/compat/mkimage.sh" "$SBX" bash >/dev/null || exit 1
"$SBX" serve --listen 127.0.0.1:0 --state-dir "$SBX_STATE_DIR" --default-template bash --no-access-log \
  --max-timeout 3600 >"$WORK/server.log" 2>&1 &
PID=$!
URL=
for _ in $(seq 1 300); do
  if line=$(grep -m1 'ready url=' "$WORK/server.log" 2>/dev/null); then
    URL=$(sed -n 's/.*ready url=\([^ ]*\).*/\1/p' <<<"$line")
    break
  fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$URL" ] || { echo "bench: sbx serve did not start:"; cat "$WORK/server.log"; exit 1; }
export E2B_API_URL=$URL E2B_SANDBOX_URL=$URL
E2B_API_KEY=$(head -n1 "$SBX_STATE_DIR/server/api-key"); export E2B_API_KEY
unset E2B_DOMAIN E2B_DEBUG
rc=0
node "$SRC/bench/serve_fork.mjs" "$CACHE/e2b-$SDKV" --pid "$PID" --rounds "$ROUNDS" --n "$N" --mb "$MB" || rc=1
kill -TERM "$PID"; wait "$PID" 2>/dev/null; PID=
echo "load after the SDK part: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "peer: the library (sbx-bench-fork --n $N --mb $MB --rounds $ROUNDS), same run"
"$BUILD/bench/sbx-bench-fork" --image bash --rounds "$ROUNDS" --n "$N" --mb "$MB" || rc=1
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
