#!/usr/bin/env bash
# `make demo`: the main job on the local backend. Builds a Debian image with
# debootstrap from this machine's apt mirror (once), then creates a sandbox,
# runs a command in it, destroys it, and prints the stage timings.
set -euo pipefail
build=${1:-build}
sbx="$build/src/cli/sbx"
image=${SBX_DEMO_IMAGE:-debian:bookworm}

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: the local provider needs root (namespaces, overlayfs, cgroups)" >&2
  exit 4
fi
if ! "$sbx" image inspect "$image" >/dev/null 2>&1; then
  echo "demo: bootstrapping $image with debootstrap (one time, a few minutes)..."
  "$sbx" image bootstrap "$image" --suite bookworm
fi

echo "demo: sbx run $image (create -> exec -> destroy)"
"$sbx" run --time "$image" -- sh -c '
  echo "  hello from $(hostname): Debian $(cat /etc/debian_version), $(nproc) cpus visible"
  echo "  whoami=$(whoami) pid1=$(cat /proc/1/comm) processes=$(ls -d /proc/[0-9]* | wc -l)"
  echo "  network: $(ls /sys/class/net | tr "\n" " ")(loopback only)"'

echo "demo: a sandbox that outlives one command"
id=$("$sbx" create --memory 512M --label demo=1 "$image")
"$sbx" exec "$id" -- sh -c 'echo "  apt: $(apt --version)"; echo data > /tmp/x'
"$sbx" exec "$id" -- cat /tmp/x | sed 's/^/  kept between execs: /'
"$sbx" ls -l demo=1
"$sbx" rm "$id" >/dev/null
echo "demo: removed $id; left over: $("$sbx" ls --json | grep -c '"id"' || true) sandboxes"
