#!/usr/bin/env bash
# Installs the Debian packages sbx needs to build, test and benchmark.
# Idempotent: packages already present are skipped, apt is not touched at all
# when nothing is missing. Mirrors come from the machine's apt configuration.
set -euo pipefail

build=(build-essential pkg-config meson ninja-build
       libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev libseccomp-dev
       libarchive-dev libssl-dev libsqlite3-dev libcriterion-dev musl-tools
       libmnl-dev libnftnl-dev clang libclang-rt-dev)
# python3-pytest: tests/python (the Python package's suite, Debian's /usr/bin/python3).
# btrfs-progs: mkfs.btrfs formats the scratch file system for writable layers
# once per host (src/providers/local/scratch.c); the rest is ioctls.
runtime=(busybox-static python3-pytest debootstrap iproute2 procps docker-registry skopeo apache2-utils btrfs-progs)
bench=(bubblewrap crun)
runtime+=(python3) # tests/fakes/openai_server.py, the policy agent's fake model server (stdlib only)
command -v node >/dev/null && command -v npm >/dev/null || runtime+=(nodejs npm) # tests/compat: the e2b npm SDK
# tests/openenv: a Python OpenEnv client against `sbx openenv serve`
runtime+=(python3-websockets)

want=("${build[@]}" "${runtime[@]}")
case "${1:-}" in
  --bench) want+=("${bench[@]}") ;;
  --all)   want+=("${bench[@]}") ;;
  "") ;;
  *) echo "usage: scripts/deps.sh [--bench|--all]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
