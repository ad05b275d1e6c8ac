#!/usr/bin/env bash
# Installs the pinned official Daytona TypeScript SDK into its own prefix:
#   tests/compat/daytona/install.sh CACHE_DIR [VERSION]
# -> CACHE_DIR/daytona-<ver>/node_modules/@daytonaio/sdk. Idempotent: a prefix
# whose package.json already names the version is left alone. The registry is
# the one in the machine's npm configuration.
set -euo pipefail
cache=${1:?usage: install.sh CACHE_DIR [VERSION]}
v=${2:-0.218.0}

command -v npm >/dev/null || { echo "install: npm not found" >&2; exit 127; }
prefix="$cache/daytona-$v"
pj="$prefix/node_modules/@daytonaio/sdk/package.json"
if [ -f "$pj" ] && node -e 'process.exit(require(process.argv[1]).version===process.argv[2]?0:1)' "$pj" "$v" 2>/dev/null; then
  exit 0
fi
echo "install: @daytonaio/sdk@$v -> $prefix"
mkdir -p "$prefix"
# A private package.json keeps npm from walking up to a parent project.
[ -f "$prefix/package.json" ] || printf '{"name":"sbx-compat-daytona-%s","private":true}\n' "${v//./-}" >"$prefix/package.json"
tries=0
until npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "@daytonaio/sdk@$v" >"$prefix/npm.log" 2>&1; do
  tries=$((tries + 1))
  if [ $tries -ge 3 ]; then
    echo "install: npm install @daytonaio/sdk@$v failed; log:" >&2
    tail -n 30 "$prefix/npm.log" >&2
    exit 1
  fi
  sleep $((tries * 5))
done
node -e 'process.exit(require(process.argv[1]).version===process.argv[2]?0:1)' "$pj" "$v" \
  || { echo "install: $pj does not say version $v" >&2; exit 1; }
