#!/usr/bin/env bash
# Installs the pinned `e2b` npm SDK versions, each into its own prefix:
#   tests/compat/install.sh CACHE_DIR [VERSION...]
# -> CACHE_DIR/e2b-<ver>/node_modules/e2b. Idempotent: a prefix whose e2b
# package.json already names the version is left alone. The registry is the
# one in the machine's npm configuration.
set -euo pipefail
cache=${1:?usage: install.sh CACHE_DIR [VERSION...]}
shift
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(2.51.0 2.30.5 2.8.4)

command -v npm >/dev/null || { echo "install: npm not found" >&2; exit 127; }
mkdir -p "$cache"
for v in "${versions[@]}"; do
  prefix="$cache/e2b-$v"
  pj="$prefix/node_modules/e2b/package.json"
  if [ -f "$pj" ] && node -e 'process.exit(require(process.argv[1]).version===process.argv[2]?0:1)' "$pj" "$v" 2>/dev/null; then
    continue
  fi
  echo "install: e2b@$v -> $prefix"
  mkdir -p "$prefix"
  # A private package.json keeps npm from walking up to a parent project.
  [ -f "$prefix/package.json" ] || printf '{"name":"sbx-compat-e2b-%s","private":true}\n' "${v//./-}" >"$prefix/package.json"
  tries=0
  until npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "e2b@$v" >"$prefix/npm.log" 2>&1; do
    tries=$((tries + 1))
    if [ $tries -ge 3 ]; then
      echo "install: npm install e2b@$v failed; log:" >&2
      tail -n 30 "$prefix/npm.log" >&2
      exit 1
    fi
    sleep $((tries * 5))
  done
  node -e 'process.exit(require(process.argv[1]).version===process.argv[2]?0:1)' "$pj" "$v" \
    || { echo "install: $pj does not say version $v" >&2; exit 1; }
done
