#!/usr/bin/env bash
# The E2B SDK compatibility suite (meson test compat/e2b-sdk):
#   tests/compat/run.sh BUILD_DIR
# Installs the pinned `e2b` npm SDK versions into $SBX_COMPAT_CACHE (default
# BUILD_DIR/compat-cache), builds the image "bash" into a private image store,
# starts BUILD_DIR/src/cli/sbx serve on a free loopback port with a private
# state dir, runs tests/compat/suite.mjs, snapshots.mjs (snapshots, fork,
# auto-resume) and ports.mjs once per version, stops the server,
# checks that no sandbox is left, then runs tests/compat/base.mjs (issue 17's
# out-of-the-box acceptance) against a second server started with no template
# flags on a store holding the image `base`, and closes with
#   compat: 3 versions, N passed, N failed, N skipped
# Without node/npm or root: skip (exit 77), or fail when SBX_MUST_WORK=1.
# SBX_COMPAT_VERSIONS="2.51.0 ..." narrows the versions.
set -uo pipefail

build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sbx=$build/src/cli/sbx
cache=${SBX_COMPAT_CACHE:-$build/compat-cache}
read -r -a versions <<<"${SBX_COMPAT_VERSIONS:-2.51.0 2.30.5 2.8.4}"

unavailable() {
  if [ "${SBX_MUST_WORK:-0}" = 1 ]; then
    echo "compat: $1 (SBX_MUST_WORK=1)"
    echo "compat: ${#versions[@]} versions, 0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "compat: skipped: $1"
  exit 77
}
command -v node >/dev/null || unavailable "node not found (scripts/deps.sh installs nodejs)"
command -v npm >/dev/null || unavailable "npm not found (scripts/deps.sh installs npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || unavailable "node $(node --version) is too old: the pinned e2b SDKs need Node.js 20 or later"
[ "$(id -u)" -eq 0 ] || unavailable "sbx serve's local sandboxes need root"
[ -x "$sbx" ] || unavailable "$sbx not built"
echo "compat: node $(node --version), npm $(npm --version), sdk cache $cache"

bash "$here/install.sh" "$cache" "${versions[@]}" || {
  echo "compat: installing the SDKs failed"
  echo "compat: ${#versions[@]} versions, 0 passed, 1 failed, 0 skipped"
  exit 1
}

# A short path: the state dir holds unix sockets (108-byte limit).
work=$(mktemp -d /tmp/sbx-compat.XXXXXX)
state=$work/state
export SBX_STATE_DIR=$state
export SBX_IMAGE_DIR=${SBX_COMPAT_IMAGE_DIR:-$build/compat-images}
mkdir -p "$state" "$SBX_IMAGE_DIR"
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  "$sbx" rm --all >/dev/null 2>&1
  # Snapshots live on the shared scratch file system, not in the state dir:
  # remove any a failed run left (snapshots.mjs deletes its own).
  for f in "$state"/local/snapshots/*.json; do
    [ -e "$f" ] && "$sbx" snapshot rm "$(basename "$f" .json)" >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

# The image behind the default template: host bash + its libraries + busybox.
bash "$here/mkimage.sh" "$sbx" bash || { echo "compat: building the image 'bash' failed"; exit 1; }

# Starts sbx serve (ARGS after the common ones) on a free loopback port and
# waits for its ready line: sets server_pid, url and keyfile.
start_server() {
  "$sbx" serve --listen 127.0.0.1:0 --state-dir "$state" "$@" >"$log" 2>&1 &
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
  [ -n "$url" ] || return 1
  [ -n "$keyfile" ] || keyfile=$state/server/api-key
}
# Stops the server: 0 when it exited within 30 s of SIGTERM.
stop_server() {
  kill -TERM "$server_pid"
  for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  local rc=0
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "compat: sbx serve did not exit within 30 s of SIGTERM"
    rc=1
  fi
  wait "$server_pid" 2>/dev/null
  server_pid=
  return $rc
}

log=$work/server.log
if ! start_server --default-template bash; then
  echo "compat: sbx serve did not start; its log:"
  sed 's/^/  | /' "$log"
  echo "compat: ${#versions[@]} versions, 0 passed, 1 failed, 0 skipped"
  exit 1
fi
echo "compat: sbx serve at $url (pid $server_pid)"

export E2B_API_URL=$url E2B_SANDBOX_URL=$url
E2B_API_KEY=$(head -n1 "$keyfile")
export E2B_API_KEY
unset E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN

total_pass=0 total_fail=0 total_skip=0
summary=()
for v in "${versions[@]}"; do
  out=$work/suite-$v.log
  node "$here/suite.mjs" "$cache/e2b-$v" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  if line=$(grep -E "^e2b@$v: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" "$out" | tail -n1); then
    read -r p f s < <(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' <<<"$line")
  else
    p=0 f=0 s=0
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
  summary+=("e2b@$v: $p passed, $f failed, $s skipped")
  r=$(node "$here/snapshots.mjs" "$cache/e2b-$v" 2>&1 | tee /dev/stderr | sed -nE 's/^snapshots e2b@[^:]*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' | tail -n1)
  read -r p f s <<<"${r:-0 1 0}"
  total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
  summary+=("snapshots e2b@$v: $p passed, $f failed, $s skipped")
  r=$(node "$here/ports.mjs" "$cache/e2b-$v" 2>&1 | tee /dev/stderr | sed -nE 's/^ports e2b@[^:]*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' | tail -n1); read -r p f s <<<"${r:-0 1 0}"; total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s)); summary+=("ports e2b@$v: $p passed, $f failed, $s skipped")
  left=$("$sbx" ls --json 2>/dev/null | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).length))')
  if [ "${left:-x}" != 0 ]; then
    echo "compat: e2b@$v left ${left:-?} sandbox(es) behind"
    total_fail=$((total_fail + 1))
  fi
done

# Stop the server; nothing may remain in its state dir.
stop_server || total_fail=$((total_fail + 1))
left=$("$sbx" ls --json 2>/dev/null)
if [ "$(tr -d ' \n' <<<"$left")" != "[]" ]; then
  echo "compat: sandboxes left after the server stopped: $left"
  total_fail=$((total_fail + 1))
fi

# Out of the box (issue 17): `sbx serve` with no template flags on a store
# holding `base`, and the SDK's defaults alone. `base` is built by
# scripts/base-template.sh into the task image store the other tests share
# (FROM the task base image: about 40 s once per store, cached after; the
# task image's bootstrap first when that store lacks it), so both build trees'
# runs reuse it. SBX_COMPAT_BASE=0 skips this part.
if [ "${SBX_COMPAT_BASE:-1}" != 0 ]; then
  base_store=${SBX_TEST_TASK_IMAGE_DIR:-$build/test-task-images}
  mkdir -p "$base_store"
  log_main=$log log=$work/server-base.log
  if ! SBX_IMAGE_DIR=$base_store bash "$here/../../scripts/base-template.sh" --update "$build" >"$work/base-build.log" 2>&1; then
    echo "compat: building the image 'base' failed:"
    tail -n 30 "$work/base-build.log" | sed 's/^/  | /'
    total_fail=$((total_fail + 1))
  elif ! start_server --image-dir "$base_store"; then
    echo "compat: sbx serve (no template flags) did not start:"
    sed 's/^/  | /' "$log"
    total_fail=$((total_fail + 1))
  else
    export E2B_API_URL=$url E2B_SANDBOX_URL=$url
    E2B_API_KEY=$(head -n1 "$keyfile")
    for v in "${versions[@]}"; do
      node "$here/base.mjs" "$cache/e2b-$v" >"$work/base-$v.log" 2>&1
      cat "$work/base-$v.log"
      r=$(sed -nE 's/^base e2b@[^:]*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' \
          "$work/base-$v.log" | tail -n1)
      read -r p f s <<<"${r:-0 1 0}"
      total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
      summary+=("base e2b@$v: $p passed, $f failed, $s skipped")
    done
    stop_server || total_fail=$((total_fail + 1))
    left=$("$sbx" ls --json 2>/dev/null)
    if [ "$(tr -d ' \n' <<<"$left")" != "[]" ]; then
      echo "compat: sandboxes left after the base server stopped: $left"
      total_fail=$((total_fail + 1))
    fi
  fi
  cat "$log" >>"$log_main"
  log=$log_main
fi
if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' "$log"; then
  echo "compat: sanitizer report in the server log"
  total_fail=$((total_fail + 1))
fi
if [ "$total_fail" -ne 0 ]; then
  echo "compat: server log (last 60 lines):"
  tail -n 60 "$log" | sed 's/^/  | /'
fi
for l in "${summary[@]}"; do echo "compat: $l"; done
echo "compat: ${#versions[@]} versions, $total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
