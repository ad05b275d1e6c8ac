#!/usr/bin/env bash
# The Daytona SDK compatibility suite (meson test compat/daytona-sdk):
#   tests/compat/daytona/run.sh BUILD_DIR
# Installs the pinned `@daytonaio/sdk` into $SBX_COMPAT_CACHE (default
# BUILD_DIR/compat-cache), builds the image "bash" into a private image store,
# starts BUILD_DIR/src/cli/sbx serve on a free loopback port with a private
# state dir (and SBX_SERVE_DAYTONA_FAIL_CREATES=2, so the suite also sees the
# quota error), runs tests/compat/daytona/suite.mjs from an empty directory
# (the SDK refuses an endpoint also named by a .env), then restart.mjs around
# a restart of the server (a sandbox keeps its name and intervals; this time
# the first create gets 429 and Retry-After), stops it,
# checks that no sandbox is left, and closes with
#   compat-daytona: 1 versions, N passed, N failed, N skipped
# Without node/npm or root: skip (exit 77), or fail when SBX_MUST_WORK=1.
set -uo pipefail

build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sbx=$build/src/cli/sbx
cache=${SBX_COMPAT_CACHE:-$build/compat-cache}
version=0.218.0
fails=2

unavailable() {
  if [ "${SBX_MUST_WORK:-0}" = 1 ]; then
    echo "compat-daytona: $1 (SBX_MUST_WORK=1)"
    echo "compat-daytona: 1 versions, 0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "compat-daytona: skipped: $1"
  exit 77
}
command -v node >/dev/null || unavailable "node not found (scripts/deps.sh installs nodejs)"
command -v npm >/dev/null || unavailable "npm not found (scripts/deps.sh installs npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || unavailable "node $(node --version) is too old: the compat suites need Node.js 20 or later"
[ "$(id -u)" -eq 0 ] || unavailable "sbx serve's local sandboxes need root"
[ -x "$sbx" ] || unavailable "$sbx not built"
echo "compat-daytona: node $(node --version), npm $(npm --version), sdk cache $cache"

bash "$here/install.sh" "$cache" "$version" || {
  echo "compat-daytona: installing the SDK failed"
  echo "compat-daytona: 1 versions, 0 passed, 1 failed, 0 skipped"
  exit 1
}

# A short path: the state dir holds unix sockets (108-byte limit).
work=$(mktemp -d /tmp/sbx-compat-dt.XXXXXX)
state=$work/state
export SBX_STATE_DIR=$state
export SBX_IMAGE_DIR=${SBX_COMPAT_IMAGE_DIR:-$build/compat-images}
mkdir -p "$state" "$SBX_IMAGE_DIR" "$work/cwd"
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

bash "$here/../mkimage.sh" "$sbx" bash || { echo "compat-daytona: building the image 'bash' failed"; exit 1; }

log=$work/server.log
# start_server LOG [PORT [FAILS]]: sbx serve on the private state dir; sets url, keyfile
start_server() {
  SBX_SERVE_DAYTONA_FAIL_CREATES=${3:-$fails} "$sbx" serve --listen "127.0.0.1:${2:-0}" --state-dir "$state" \
    --default-template bash >"$1" 2>&1 &
  server_pid=$!
  url= keyfile=
  for _ in $(seq 1 300); do
    if line=$(grep -m1 'ready url=' "$1" 2>/dev/null); then
      url=$(sed -n 's/.*ready url=\([^ ]*\).*/\1/p' <<<"$line")
      keyfile=$(sed -n 's/.*key_file=\([^ ]*\).*/\1/p' <<<"$line")
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
}
# stop_server: SIGTERM (sandboxes are kept for the next start); 0 when it exited
stop_server() {
  kill -TERM "$server_pid"
  for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "compat-daytona: sbx serve did not exit within 30 s of SIGTERM"
    return 1
  fi
  wait "$server_pid" 2>/dev/null
  server_pid=
}
start_server "$log"
if [ -z "$url" ]; then
  echo "compat-daytona: sbx serve did not start; its log:"
  sed 's/^/  | /' "$log"
  echo "compat-daytona: 1 versions, 0 passed, 1 failed, 0 skipped"
  exit 1
fi
[ -n "$keyfile" ] || keyfile=$state/server/api-key
echo "compat-daytona: sbx serve at $url (pid $server_pid)"

unset DAYTONA_SERVER_URL DAYTONA_JWT_TOKEN DAYTONA_ORGANIZATION_ID DAYTONA_TARGET
export DAYTONA_API_URL=$url/api DAYTONA_USE_DEPRECATED_POLLING=true
DAYTONA_API_KEY=$(head -n1 "$keyfile")
export DAYTONA_API_KEY

out=$work/suite.log
(cd "$work/cwd" && SBX_DAYTONA_SERVER_PID=$server_pid node "$here/suite.mjs" "$cache/daytona-$version" "$fails") 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if line=$(grep -E "^daytona@$version: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" "$out" | tail -n1); then
  read -r p f s < <(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' <<<"$line")
else
  p=0 f=0 s=0
fi
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1

# A restart keeps a sandbox's Daytona name, labels and intervals (server.db).
rname=sbx-restart-$$
(cd "$work/cwd" && node "$here/restart.mjs" "$cache/daytona-$version" before "$rname") || f=$((f + 1))
port=${url##*:}
stop_server || f=$((f + 1))
log2=$work/server2.log
start_server "$log2" "$port" 1:429
if [ -z "$url" ]; then
  echo "compat-daytona: sbx serve did not restart; its log:"
  sed 's/^/  | /' "$log2"
  f=$((f + 1))
else
  (cd "$work/cwd" && node "$here/restart.mjs" "$cache/daytona-$version" after "$rname") && p=$((p + 2)) || f=$((f + 1))
fi
left=$("$sbx" ls --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).length))')
if [ "${left:-x}" != 0 ]; then
  echo "compat-daytona: the suite left ${left:-?} sandbox(es) behind"
  f=$((f + 1))
fi

if [ -n "$server_pid" ]; then
  stop_server || f=$((f + 1))
fi
[ -f "$log2" ] && cat "$log2" >>"$log"
if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$log"; then
  echo "compat-daytona: sanitizer report in the server log"
  f=$((f + 1))
fi
# (stdout's api_key= line, printed once when the key is made, is the one place it belongs)
if grep -v '^api_key=' "$log" | grep -qF "$DAYTONA_API_KEY"; then
  echo "compat-daytona: the API key appears in the server log"
  f=$((f + 1))
fi
if [ "$f" -ne 0 ]; then
  echo "compat-daytona: server log (last 60 lines):"
  tail -n 60 "$log" | sed 's/^/  | /'
fi
echo "compat-daytona: 1 versions, $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
