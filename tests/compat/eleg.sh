#!/usr/bin/env bash
# The E2B-leg acceptance (meson test compat/e2b-leg; issue 17): the reference
# framework's E2B leg end to end on `sbx serve`, with the official SDK.
#   tests/compat/eleg.sh BUILD_DIR
# 1. installs the pinned `e2b` SDKs (2.51.0 and 2.30.5; install.sh) and the
#    pinned `ws` WebSocket client into $SBX_COMPAT_CACHE (BUILD/compat-cache);
# 2. makes every bundled task's image a template the server knows: the task
#    image store ($SBX_TEST_TASK_IMAGE_DIR, else BUILD/test-task-images, shared
#    with the other tests) gets the base image sbx-tasks:bookworm (bootstrapped
#    once, minutes) and `sbx bake examples/tasks --all` (cached after once);
#    the baked image names are the templateIDs;
# 3. starts BUILD/src/cli/sbx serve on that store (loopback, free port,
#    private state dir) and runs tests/compat/eleg.mjs once per SDK version:
#    per task, an environment server (tests/integration/envhelper, uploaded)
#    in the sandbox, reached at getHost(port) over WebSocket, plays the
#    oracle episode (12/12 reward 1), and a wrong solution scores 0;
# 4. stops the server, checks that no sandbox is left, and closes with
#    "e2b-leg: 2 versions, N passed, N failed, N skipped".
# Without node/npm or root: skip (exit 77), or fail when SBX_MUST_WORK=1.
# SBX_COMPAT_VERSIONS narrows the versions; ELEG_TASKS / ELEG_CONCURRENCY
# (default 3) go to eleg.mjs; SBX_ENVHELPER names the helper (meson sets it).
# Each sweep prints its wall time, the client's and the server's CPU time and
# the load; ELEG_PEER=1 also runs the peer (sbx golden --backend e2b).
set -uo pipefail

build=$(cd "${1:?usage: eleg.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
sbx=$build/src/cli/sbx
cache=${SBX_COMPAT_CACHE:-$build/compat-cache}
read -r -a versions <<<"${SBX_COMPAT_VERSIONS:-2.51.0 2.30.5}"
ws_version=8.18.3
helper=${SBX_ENVHELPER:-$build/tests/integration/envhelper}
store=${SBX_TEST_TASK_IMAGE_DIR:-$build/test-task-images}

summary() { echo "e2b-leg: ${#versions[@]} versions, $1 passed, $2 failed, $3 skipped"; }
unavailable() {
  if [ "${SBX_MUST_WORK:-0}" = 1 ]; then
    echo "e2b-leg: $1 (SBX_MUST_WORK=1)"
    summary 0 1 0
    exit 1
  fi
  echo "e2b-leg: skipped: $1"
  exit 77
}
die() { echo "e2b-leg: $1"; summary 0 1 0; exit 1; }
command -v node >/dev/null || unavailable "node not found (scripts/deps.sh installs nodejs)"
command -v npm >/dev/null || unavailable "npm not found (scripts/deps.sh installs npm)"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] ||
  unavailable "node $(node --version) is too old: the pinned e2b SDKs need Node.js 20 or later"
[ "$(id -u)" -eq 0 ] || unavailable "sbx serve's local sandboxes need root"
[ -x "$sbx" ] || unavailable "$sbx not built"
[ -x "$helper" ] || die "the environment server $helper is not built (ninja builds tests/integration/envhelper)"

bash "$here/install.sh" "$cache" "${versions[@]}" || die "installing the e2b SDKs failed"
# Node 20's WebSocket needs --experimental-websocket and takes no custom DNS
# lookup (getHost() names are sslip.io names, resolved by the test itself).
wsdir=$cache/ws-$ws_version
if ! node -e 'process.exit(require(process.argv[1]).version===process.argv[2]?0:1)' \
     "$wsdir/node_modules/ws/package.json" "$ws_version" 2>/dev/null; then
  echo "e2b-leg: installing ws@$ws_version -> $wsdir"
  mkdir -p "$wsdir"
  [ -f "$wsdir/package.json" ] || echo '{"name":"sbx-compat-ws","private":true}' >"$wsdir/package.json"
  npm install --prefix "$wsdir" --no-audit --no-fund --loglevel=error "ws@$ws_version" >"$wsdir/npm.log" 2>&1 ||
    { tail -n 20 "$wsdir/npm.log"; die "npm install ws@$ws_version failed"; }
fi

# A short path: the state dir holds unix sockets (108-byte limit).
work=$(mktemp -d /tmp/sbx-eleg.XXXXXX)
state=$work/state
export SBX_STATE_DIR=$state SBX_IMAGE_DIR=$store
mkdir -p "$state" "$store"
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  "$sbx" rm --all >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# The tasks say FROM sbx-tasks:bookworm: bootstrap it as scripts/demo.sh does.
# shellcheck source=/dev/null
. "$src/examples/tasks/base-image.env"
if ! "$sbx" image inspect "$SBX_TASKS_IMAGE" >/dev/null 2>&1; then
  echo "e2b-leg: bootstrapping the task base image $SBX_TASKS_IMAGE into $store (one time, minutes)"
  "$sbx" image bootstrap "$SBX_TASKS_IMAGE" --suite "$SBX_TASKS_SUITE" --include "$SBX_TASKS_PACKAGES" \
    >"$work/bootstrap.log" 2>&1 || { tail -n 30 "$work/bootstrap.log"; die "bootstrapping $SBX_TASKS_IMAGE failed"; }
fi
# Each task's image, by the name the server serves it as a template.
if ! (cd "$src" && "$sbx" bake examples/tasks --all) >"$work/bake.log" 2>&1; then
  sed 's/^/  | /' "$work/bake.log"
  die "sbx bake examples/tasks --all failed"
fi
awk 'BEGIN { printf "{" } $3 ~ /^(built|cached|prebuilt|pulled)$/ { printf "%s\"%s\":\"%s\"", n++ ? "," : "", $1, $2 }
     END { print "}" }' "$work/bake.log" >"$work/images.json"
node -e 'const m=require(process.argv[1]); if (Object.keys(m).length !== 12) process.exit(1)' "$work/images.json" ||
  { sed 's/^/  | /' "$work/bake.log"; die "sbx bake did not name 12 task images: $(cat "$work/images.json")"; }

log=$work/server.log
"$sbx" serve --listen 127.0.0.1:0 --state-dir "$state" --image-dir "$store" >"$log" 2>&1 &
server_pid=$!
url= keyfile=
for _ in $(seq 1 300); do
  if line=$(grep -m1 'ready url=' "$log" 2>/dev/null); then
    url=$(sed -n 's/.*ready url=\([^ ]*\).*/\1/p' <<<"$line")
    keyfile=$(sed -n 's/.*key_file=\([^ ]*\).*/\1/p' <<<"$line")
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { sed 's/^/  | /' "$log"; die "sbx serve did not start; its log is above"; }
echo "e2b-leg: sbx serve at $url (pid $server_pid), templates from $store"
export E2B_API_URL=$url E2B_SANDBOX_URL=$url SBX_ENVHELPER=$helper
E2B_API_KEY=$(head -n1 "${keyfile:-$state/server/api-key}")
export E2B_API_KEY
unset E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN

# CPU seconds the server has used so far (utime + stime), for the figures.
tck=$(getconf CLK_TCK)
server_cpu() { awk -v t="$tck" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$server_pid/stat"; }
TIMEFORMAT='%R %U %S'

total_pass=0 total_fail=0 total_skip=0
lines=()
for v in "${versions[@]}"; do
  out=$work/eleg-$v.log
  c0=$(server_cpu)
  { time node "$here/eleg.mjs" "$cache/e2b-$v" "$wsdir" "$src/examples/tasks" "$work/images.json" \
      >"$out" 2>&1; } 2>"$work/time-$v"
  rc=$?
  cat "$out"
  read -r wall usr sys <"$work/time-$v"
  echo "e2b-leg: e2b@$v: wall ${wall} s, client CPU $(awk -v a="$usr" -v b="$sys" 'BEGIN{print a+b}') s, server CPU $(awk -v a="$(server_cpu)" -v b="$c0" 'BEGIN{print a-b}') s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  r=$(sed -nE 's/^e2b-leg e2b@[^:]*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' "$out" | tail -n1)
  read -r p f s <<<"${r:-0 1 0}"
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
  lines+=("e2b@$v: $p passed, $f failed, $s skipped")
  left=$("$sbx" ls --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).length))')
  if [ "${left:-x}" != 0 ]; then
    echo "e2b-leg: e2b@$v left ${left:-?} sandbox(es) behind"
    total_fail=$((total_fail + 1))
  fi
done

# ELEG_PEER=1: the same 12 oracle episodes through the same server with the
# e2b provider's C client (sbx golden --backend e2b: no server in the sandbox,
# no WebSocket), for the side-by-side figures in docs/server.md.
if [ "${ELEG_PEER:-0}" = 1 ]; then
  c0=$(server_cpu)
  { time (cd "$src" && E2B_API_KEY_FILE=${keyfile:-$state/server/api-key} SBX_STATE_DIR=$work/peer-state \
      "$sbx" golden examples/tasks --all --backend e2b --concurrency "${ELEG_CONCURRENCY:-3}" \
      >"$work/peer.log" 2>&1); } 2>"$work/time-peer"
  tail -n 1 "$work/peer.log"
  read -r wall usr sys <"$work/time-peer"
  echo "e2b-leg: peer (sbx golden --backend e2b): wall ${wall} s, client CPU $(awk -v a="$usr" -v b="$sys" 'BEGIN{print a+b}') s, server CPU $(awk -v a="$(server_cpu)" -v b="$c0" 'BEGIN{print a-b}') s, load $(cut -d' ' -f1-3 /proc/loadavg)"
fi

kill -TERM "$server_pid"
for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server_pid" 2>/dev/null; then
  echo "e2b-leg: sbx serve did not exit within 30 s of SIGTERM"
  total_fail=$((total_fail + 1))
fi
wait "$server_pid" 2>/dev/null
server_pid=
if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$log"; then
  echo "e2b-leg: sanitizer report in the server log"
  total_fail=$((total_fail + 1))
fi
if [ "$total_fail" -ne 0 ]; then
  echo "e2b-leg: server log (last 60 lines):"
  tail -n 60 "$log" | sed 's/^/  | /'
fi
for l in "${lines[@]}"; do echo "e2b-leg: $l"; done
summary "$total_pass" "$total_fail" "$total_skip"
[ "$total_fail" -eq 0 ]
